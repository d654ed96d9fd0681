"""Replay the echo canceller on the recordings `voicecli bench duplex --keep-audio DIR` kept: each echo-only answer's
ERLE as the canceller in this checkout computes it, on the very same audio the run measured.

Why: a duplex run takes ~1 h and its figures move with the machine's load and the echo path's jitter from run to run;
a change to voicecli/audio/echo_cancel.py is compared here on identical input, before and after (git stash), and the
bench is then re-run on the change that holds up. Usage: .venv/bin/python scripts/duplex_replay.py DIR
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from voicecli.bench.duplex import replay_erle


def main(folder: Path) -> int:
    files = sorted(folder.glob("*.npz"))
    if not files:
        print(f"no sessions (.npz) in {folder}: run `voicecli bench duplex --keep-audio {folder}` first")
        return 2
    every: list[float] = []
    for path in files:
        figures = replay_erle(path)
        if figures is None:
            print("the echo canceller's binding (pywebrtc-audio) is not installed")
            return 2
        every += figures
        print(f"{path.stem}: ERLE per echo-only answer " + ", ".join(f"{f:.1f}" for f in figures) + " dB")
    if every:
        print(f"all: median {statistics.median(every):.1f} dB, min {min(every):.1f}, max {max(every):.1f} "
              f"({len(every)} answers)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
