"""How the double-talk detector (voicecli/audio/double_talk.py) takes a far end off the echo's delay, with its lag
search and without it, on the recordings bench duplex kept.

Each session's far end is what the speaker's recording played, laid on the microphone's clock at the echo's delay
(the median the run's canceller reported) plus an offset: 0, and the few ms the live far end can be off (the
player's estimated DAC times, a bulk delay followed in ~6 ms steps, restarts). The detector is fed as the canceller
feeds it: 32 ms blocks, the far end `lead` ahead. Reported per setting: the flag onsets in the answers nobody
interrupted (each would hold the answer ~1 s live) over their minutes, and the interruptions flagged within their
first half second (all, and those mostly under the echo: bench duplex's double talk).
Usage (from the repository root, with the recordings):
  .venv/bin/python results/bench/double-talk-lags-20261206/lags.py /tmp/keepH2=results/bench/duplex-20261205-dacsettle \
      /tmp/keepN=results/bench/duplex-20261206-nosettle
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from false_holds import interruption_starts, kept_sessions, played_at_echo

from voicecli.audio.double_talk import SEARCH_MS, DoubleTalkDetector
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import DOUBLE_TALK

BLOCK = 512
OFFSETS_MS = (0, -10, 10, 15)
SEARCHES_MS = (0, SEARCH_MS)


def flags(mic: np.ndarray, ref: np.ndarray, search_ms: int) -> np.ndarray:
    """`near_end` after each block; `ref` is the far end at the delay the detector is told."""
    detector = DoubleTalkDetector(search_ms=search_ms)
    far = np.concatenate([ref[detector.lead :], np.zeros(detector.lead, np.float32)])
    out = []
    for end in range(BLOCK, len(mic) + 1, BLOCK):
        detector.feed(mic[end - BLOCK : end], far[end - BLOCK : end])
        out.append(detector.near_end)
    return np.array(out)


def main(arguments: list[str]) -> None:
    onsets = {(s, o): 0 for s in SEARCHES_MS for o in OFFSETS_MS}
    told: dict[tuple[int, int], list[tuple[float, bool]]] = {key: [] for key in onsets}
    echo_s = 0.0
    for session, spans, samples in kept_sessions(arguments):
        echo_s += sum(b - a for a, b in spans) / SPEECH_RATE
        starts = interruption_starts(session, samples)
        for off in OFFSETS_MS:
            ref = played_at_echo(session, samples, off / 1000)
            for search in SEARCHES_MS:
                flagged = flags(session.mic, ref, search)
                ends = (np.arange(len(flagged)) + 1) * BLOCK
                rising = flagged & ~np.concatenate([[False], flagged[:-1]])
                onsets[search, off] += sum(int(rising[(ends >= a) & (ends <= b)].sum()) for a, b in spans)
                for share, start in starts:
                    first = (ends >= start) & (ends <= start + SPEECH_RATE // 2)
                    told[search, off].append((share, bool(flagged[first].any())))
    print(f"echo alone: {echo_s / 60:.1f} min in answers nobody interrupted")
    for (search, off), count in onsets.items():
        heard = told[search, off]
        over = [t for share, t in heard if share >= DOUBLE_TALK]
        print(f"search ±{search} ms, far end {off:+d} ms off: {count} flags in the echo alone; interruptions told "
              f"within 0.5 s {sum(t for _, t in heard)} of {len(heard)}, double talk {sum(over)} of {len(over)}")


if __name__ == "__main__":
    main(sys.argv[1:])
