"""Live, how far off was the far end the double-talk detector read? Read from the canceller's own inputs, which
`bench duplex --keep-audio` keeps per session with audio.echo_dump (voicecli/audio/echo_dump.py).

Every 2 s of the answers nobody interrupted, and around each double-talk flag in them: the lag at which the capture
best matches the detector's far end (GCC-PHAT over the last second), against the lag it should have (the detector's
`lead`). The detector searches SEARCH_MS either side. Also: the flags the detector made live, and those a replay of
the recordings (the speaker's recording at its true times, `cancelled_capture`) makes.
Usage: .venv/bin/python results/bench/double-talk-lags-20261206/dump_alignment.py KEEP_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.double_talk import SEARCH_MS, DoubleTalkDetector
from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import cancelled_capture, load_session

COLUMN = {name: index for index, name in enumerate(COLUMNS)}
MS = SPEECH_RATE // 1000


def gcc_lag(x: NDArray[np.float32], y: NDArray[np.float32], most: int) -> tuple[int, float]:
    """The lag (samples) by which x follows y, within +-most, and the height of its GCC-PHAT peak."""
    n = 1 << (len(x) + len(y)).bit_length()
    cross = np.fft.rfft(x, n) * np.conj(np.fft.rfft(y, n))
    r = np.fft.irfft(cross / (np.abs(cross) + 1e-12), n)
    r = np.concatenate([r[-most:], r[: most + 1]])
    best = int(np.argmax(r))
    return best - most, float(r[best])


def onsets(flags: NDArray[np.bool_]) -> NDArray[np.intp]:
    return np.flatnonzero(flags & ~np.concatenate([[False], flags[:-1]]))


def main(folder: Path) -> None:
    lead = DoubleTalkDetector().lead
    for dump in sorted(p for p in folder.glob("aec-*ms") if p.is_dir()):
        audio, blocks = load_dump(dump)
        session, spans = load_session(dump.with_suffix(".npz"))
        ends = np.cumsum(blocks[:, COLUMN["samples"]]).astype(int)
        at = blocks[:, COLUMN["at"]]
        times = [(session.mic_timing.time(a), session.mic_timing.time(b)) for a, b in spans]
        echo_only = np.array([any(a <= t <= b for a, b in times) for t in at])
        live = blocks[:, COLUMN["double_talk"]].astype(bool)
        replayed: list[bool] = []
        cancelled_capture(session, replayed)
        replay_at = [session.mic_timing.time((i + 1) * 512) for i in onsets(np.array(replayed))]
        capture, far = audio["capture"], audio["far_dtd"]
        offs = []
        for i in range(0, len(blocks), 62):
            end = ends[i]
            if echo_only[i] and blocks[i, COLUMN["aligned"]] >= 0 and end >= SPEECH_RATE:
                lag, peak = gcc_lag(capture[end - SPEECH_RATE : end], far[end - SPEECH_RATE : end], 100 * MS)
                if peak > 0.1:
                    offs.append((lag - lead) / MS)
        off = np.abs(np.array(offs))
        print(f"{dump.name}: far end off the echo every 2 s of the echo alone: p50 {np.median(offs):+.1f} ms, "
              f"|off| > 10 ms {np.mean(off > 10):.0%}, > {SEARCH_MS} ms {np.mean(off > SEARCH_MS):.0%} of {len(offs)}")
        print(f"  flags live at {[round(float(at[i]), 2) for i in onsets(live)]}")
        print(f"  flags replayed from the recordings at {[round(float(t), 2) for t in replay_at]}")
        for i in onsets(live):
            if echo_only[i]:
                end = ends[i]
                lag, peak = gcc_lag(capture[end - SPEECH_RATE : end], far[end - SPEECH_RATE : end], 100 * MS)
                print(f"  in the echo alone at {at[i]:.2f}: far end {(lag - lead) / MS:+.1f} ms off (peak {peak:.2f})")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
