"""Did AEC3 see one alignment through each answer? Read from the echo dumps `voicecli bench duplex --keep-audio`
keeps (voicecli/audio/echo_dump.py): the capture and the far end exactly as AEC3 was fed them, live.

First, how the capture's timeline moved against the reference: blocks.tsv gives, per capture block, the reference
index of its first sample (`first`); less the samples taken in before it, that is where the capture's timeline is
laid (the canceller's anchor; its shifts of the reference, which follow a changed echo delay on purpose, are not in
it). Each change is a misalignment AEC3 re-adapts to, unless the reference began a new stretch there. Over the
session, the total change per second is how far the sound card's clock runs from the monotonic one when the
timeline follows the callbacks' times.

Then, over each answer nobody interrupted, every STEP_S a GCC-PHAT delay estimate (the canceller's own, voicecli.audio.
echo_delay) of the capture against the far end over the latest WINDOW_S: the lag at which AEC3 found its echo.
A far end and a capture on one timeline keep that lag; each change of 2 samples or more between two clear windows
is a misalignment AEC3 re-adapts to. Changes where the canceller shifted the reference on purpose (following a
changed echo delay: the `shift` column) are counted apart. Some changes are the echo path's own: the bench's router
delays the echo in real time, and a loaded machine makes it late at times (voicecli/bench/echo_path.py). (The same
estimates over the recordings, the speaker laid on the microphone by the recorders' clocks, change 200-240 times a
session: that mapping is interpolated once a second and off by up to ~10 ms, so it tells nothing at this scale.)
Usage: .venv/bin/python results/bench/far-end-clock-20261206/aligned_lags.py KEEP_DIR [KEEP_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.echo_delay import estimate_delay
from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import load_session

COLUMN = {name: index for index, name in enumerate(COLUMNS)}
WINDOW_S = 0.5
STEP_S = 0.25
MAX_LAG = round(0.3 * SPEECH_RATE)
MOVED = 2


def changes(capture: NDArray[np.float32], far: NDArray[np.float32], ends: range, shift: NDArray[np.float64],
            block_ends: NDArray[np.int64]) -> tuple[int, int, int]:
    """Clear windows ending at `ends`; the lag's changes between consecutive ones where `shift` (per block ending at
    `block_ends`) stayed, and where it changed too."""
    window = round(WINDOW_S * SPEECH_RATE)
    clear = moved = followed = 0
    previous: tuple[int, float] | None = None
    for end in ends:
        if end < window + MAX_LAG:
            continue
        estimate = estimate_delay(capture[end - window : end], far[end - window - MAX_LAG : end], MAX_LAG)
        if estimate is None or not estimate.clear:
            continue
        clear += 1
        now = float(shift[min(int(np.searchsorted(block_ends, end)), len(shift) - 1)])
        if previous is not None and abs(estimate.lag - previous[0]) >= MOVED:
            if now != previous[1]:
                followed += 1
            else:
                moved += 1
        previous = (estimate.lag, now)
    return clear, moved, followed


def main(folders: list[Path]) -> None:
    step = round(STEP_S * SPEECH_RATE)
    for folder in folders:
        for dump in sorted(p for p in folder.glob("aec-*ms") if p.is_dir()):
            audio, blocks = load_dump(dump)
            ends = np.cumsum(blocks[:, COLUMN["samples"]]).astype(np.int64)
            at, shift = blocks[:, COLUMN["at"]], blocks[:, COLUMN["shift"]]
            session, spans = load_session(dump.with_suffix(".npz"))
            answers = [(session.mic_timing.time(a), session.mic_timing.time(b)) for a, b in spans]
            sizes = blocks[:, COLUMN["samples"]]
            laid = blocks[:, COLUMN["first"]] - (np.cumsum(sizes) - sizes)
            moved = np.flatnonzero(np.diff(laid) != 0) + 1
            steps = laid[moved] - laid[moved - 1]
            inside = sum(any(a <= at[i] <= b for a, b in answers) for i in moved)
            seconds, total = float(at[-1] - at[0]), float(laid[-1] - laid[0])
            print(f"{folder.name}/{dump.name}: {seconds:.0f} s, the capture's timeline moved {len(moved)} times "
                  f"({inside} inside answers nobody interrupted), {int(np.sum(steps < 0))} earlier / "
                  f"{int(np.sum(steps > 0))} later, median {np.median(np.abs(steps)) if len(steps) else 0:.0f} "
                  f"samples; in all {total:+.0f} samples ({total / seconds / SPEECH_RATE * 1e6:+.0f} ppm of the "
                  "session)")
            live = [0, 0, 0]
            for a, b in answers:
                first, last = (int(ends[min(int(i), len(ends) - 1)]) for i in np.searchsorted(at, [a, b]))
                live = [x + y for x, y in zip(live, changes(audio["capture"], audio["far"], range(first, last, step),
                                                             shift, ends), strict=True)]
            print(f"{folder.name}/{dump.name}, {len(spans)} answers nobody interrupted: the lag AEC3 saw changed by "
                  f">= {MOVED} samples {live[1]} times in {live[0]} clear windows ({live[2]} more where the "
                  f"canceller shifted the reference on purpose)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    main([Path(a) for a in sys.argv[1:]])
