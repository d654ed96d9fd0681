"""Why the live canceller passes more echo than its replay on the recordings: AEC3 run again on the live inputs its
echo dump kept, and how the live far end moves against the speaker's own recording.

For each session of KEEP_DIR (kept by `bench duplex --keep-audio`, with its echo dump): the ERLE of each answer
nobody interrupted for (1) what the canceller handed on live (`out.f32`), (2) a fresh AEC3 fed the dump's capture
and far end block by block (`capture.f32`, `far.f32`), (3) this checkout's canceller over the recordings
(`cancelled_capture`). Then the lag of the live far end against the speaker's recording laid on the microphone's
clock, per 100 ms of those answers (windows matching with correlation >= MATCH): a far end that keeps its place
keeps one lag.
Usage: .venv/bin/python results/bench/barge-in-length-20261206/far_drift.py KEEP_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from false_holds import speaker_on_mic

from voicecli.audio.echo_cancel import erle_db, new_aec3
from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import best_match, cancelled_capture, live_output, load_session

WINDOW = SPEECH_RATE // 10
SEARCH = round(0.15 * SPEECH_RATE)
MATCH = 0.9


def erle(mic: NDArray[np.float32], cleaned: NDArray[np.float32], spans: list[tuple[int, int]]) -> list[float]:
    return [round(erle_db(mic[a:b], cleaned[a:b]), 1) for a, b in spans]


def rerun(capture: NDArray[np.float32], far: NDArray[np.float32], sizes: NDArray[np.int64]) -> NDArray[np.float32]:
    """A fresh AEC3, as the canceller builds it, fed the dump's blocks."""
    apm = new_aec3()
    out = np.zeros_like(capture)
    first = 0
    for size in sizes:
        out[first : first + size] = np.asarray(apm.process(capture[first : first + size], far[first : first + size]))
        first += size
    return out


def lags(far: NDArray[np.float32], speaker: NDArray[np.float32], a: int, b: int) -> list[int]:
    """Per WINDOW of [a, b): the lag (samples) at which the live far end best matches the speaker's recording."""
    found = []
    for start in range(max(a, SEARCH), min(b, len(far) - WINDOW - SEARCH), WINDOW):
        piece = far[start : start + WINDOW]
        if np.sqrt(np.mean(piece**2)) < 1e-3:
            continue
        best, correlation = best_match(piece, speaker[start - SEARCH : start + WINDOW + SEARCH])
        if correlation >= MATCH:
            found.append(best - SEARCH)
    return found


def main(folder: Path) -> None:
    for path in sorted(folder.glob("*.npz")):
        session, spans = load_session(path)
        dump = path.with_suffix("")
        audio, blocks = load_dump(dump)
        capture, far = audio["capture"], audio["far"]
        again = rerun(capture, far, blocks[:, COLUMNS.index("samples")].astype(np.int64))
        live = live_output(session, dump)
        redone = live_output(session, dump, out=again)
        farther = live_output(session, dump, out=far)
        replayed = cancelled_capture(session)
        assert live is not None and redone is not None and farther is not None and replayed is not None
        print(f"{path.stem}: ERLE per answer nobody interrupted, dB")
        print(f"  live output:                      {erle(session.mic, live, spans)}")
        print(f"  AEC3 again on the live inputs:    {erle(session.mic, redone, spans)}")
        print(f"  the canceller over the recordings: {erle(session.mic, replayed, spans)}")
        speaker = speaker_on_mic(session, 0.0)
        for a, b in spans:
            found = lags(farther, speaker, a, b)
            if len(found) < 2:
                continue
            moves = np.abs(np.diff(found))
            print(f"  answer at {a / SPEECH_RATE:.0f} s: live far end vs the speaker's recording over "
                  f"{len(found)} windows: lag {min(found)}..{max(found)} samples (median {np.median(found):.0f}), "
                  f"moved >= 2 samples between windows {int(np.sum(moves >= 2))} times, median move "
                  f"{np.median(moves):.0f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    main(Path(sys.argv[1]))
