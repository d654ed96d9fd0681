"""Replay the echo canceller on the recordings `voicecli bench duplex --keep-audio DIR` kept: each echo-only answer's
ERLE as the canceller in this checkout computes it, on the very same audio the run measured; and, where the run kept
the canceller's echo dump, as the app's canceller got it live (the run's `erle_live_db`).

Why: a duplex run takes ~1 h and its figures move with the machine's load and the echo path's jitter from run to run;
a change to voicecli/audio/echo_cancel.py is compared here on identical input, before and after (git stash), and the
bench is then re-run on the change that holds up. Usage: .venv/bin/python scripts/duplex_replay.py DIR
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from voicecli.bench.duplex import live_erle, replay_erle


def main(folder: Path) -> int:
    files = sorted(folder.glob("*.npz"))
    if not files:
        print(f"no sessions (.npz) in {folder}: run `voicecli bench duplex --keep-audio {folder}` first")
        return 2
    every: list[float] = []
    every_live: list[float] = []
    for path in files:
        figures = replay_erle(path)
        if figures is None:
            print("the echo canceller's binding (pywebrtc-audio) is not installed")
            return 2
        every += figures
        print(f"{path.stem}: ERLE per echo-only answer " + ", ".join(f"{f:.1f}" for f in figures) + " dB")
        if (live := live_erle(path)) is not None:
            every_live += live
            print(f"{path.stem}: live, from its echo dump " + ", ".join(f"{f:.1f}" for f in live) + " dB")
    for label, figures in (("all", every), ("all live", every_live)):
        if figures:
            print(f"{label}: median {statistics.median(figures):.1f} dB, min {min(figures):.1f}, "
                  f"max {max(figures):.1f} ({len(figures)} answers)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
