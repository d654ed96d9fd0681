"""How the capture's timeline moved against the far-end reference, live, read from the echo dumps that
`voicecli bench duplex --keep-audio` keeps beside each session (voicecli/audio/echo_dump.py).

blocks.tsv gives, per capture block, the reference index of its first sample (`first`); less the samples taken in
before it, that is where the capture's timeline is laid (the canceller's anchor; its shifts of the reference, which
follow a changed echo delay on purpose, are not in it). A
timeline that holds still keeps it; each change is a misalignment AEC3 has to re-adapt to. Over the session, the
total change per second is how far the sound card's clock runs from the monotonic one when the timeline follows the
callbacks' times (the reference then counts the card's samples while the capture steps to the monotonic clock).
Also: how many of the moves fell inside an answer nobody interrupted (the session's `.npz` says where those are).
Usage: .venv/bin/python results/bench/far-end-clock-20261206/timeline_moves.py KEEP_DIR [KEEP_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import load_session

COLUMN = {name: index for index, name in enumerate(COLUMNS)}


def main(folders: list[Path]) -> None:
    for folder in folders:
        for dump in sorted(p for p in folder.glob("aec-*ms") if p.is_dir()):
            _, blocks = load_dump(dump)
            sizes = blocks[:, COLUMN["samples"]]
            laid = blocks[:, COLUMN["first"]] - (np.cumsum(sizes) - sizes)
            at = blocks[:, COLUMN["at"]]
            session, spans = load_session(dump.with_suffix(".npz"))
            answers = [(session.mic_timing.time(a), session.mic_timing.time(b)) for a, b in spans]
            moved = np.flatnonzero(np.diff(laid) != 0) + 1
            steps = laid[moved] - laid[moved - 1]
            inside = sum(any(a <= at[i] <= b for a, b in answers) for i in moved)
            seconds = float(at[-1] - at[0])
            total = float(laid[-1] - laid[0])
            print(f"{folder.name}/{dump.name}: {seconds:.0f} s, {len(moved)} moves ({inside} inside answers nobody "
                  f"interrupted), {int(np.sum(steps < 0))} earlier / {int(np.sum(steps > 0))} later, median "
                  f"{np.median(np.abs(steps)) if len(steps) else 0:.0f} samples; in all {total:+.0f} samples "
                  f"({total / seconds / SPEECH_RATE * 1e6:+.0f} ppm of the session)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    main([Path(a) for a in sys.argv[1:]])
