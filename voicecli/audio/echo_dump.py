"""What the echo canceller was fed, live, written as it comes: the capture, the far end as AEC3 read it and as the
double-talk detector read it, and the canceller's state per block (audio.echo_dump, like WebRTC's aecdump).

Why: a live run and its replay disagree. The replay (`voicecli bench duplex --keep-audio`) feeds the canceller the
speaker's own recording at its true times, while live the far end is what the player handed the device at its
estimated DAC times; the double-talk detector flagged the echo alone ~0 times replayed and several times an answer
live, and some false barge-ins happen only live. With this the live inputs themselves can be replayed and laid
against the recordings. The files are appended block by block, so a process stopped by a signal keeps them whole
up to its last block: `capture.f32`, `far.f32`, `far_dtd.f32`, `out.f32` (float32 at 16 kHz, the same length;
far_dtd silent while no delay is aligned; out what the canceller handed on) and `blocks.tsv`, one line per block
(see COLUMNS). Off unless a directory is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, TextIO

import numpy as np
from numpy.typing import NDArray

SIGNALS: Final = ("capture", "far", "far_dtd", "out")
COLUMNS: Final = ("at", "first", "samples", "shift", "aligned", "settled", "trusted", "double_talk")
"""blocks.tsv: the monotonic time of the block's last sample, the reference index of its first, its length, the
reference's shift and the aligned bulk delay (samples; -1: none), and the canceller's state after it (0/1)."""


class EchoDump:
    """Appends each block the canceller processes to the files in `folder` (created; earlier files replaced)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._audio = {name: (folder / f"{name}.f32").open("wb") for name in SIGNALS}
        self._blocks: TextIO = (folder / "blocks.tsv").open("w", encoding="utf-8")
        self._blocks.write("\t".join(COLUMNS) + "\n")

    def write(self, capture: NDArray[np.float32], far: NDArray[np.float32], far_dtd: NDArray[np.float32] | None,
              out: NDArray[np.float32], state: tuple[float, int, int, int, int, bool, bool, bool]) -> None:
        """One block: the SIGNALS (equal lengths) and its COLUMNS."""
        silent = np.zeros(len(capture), np.float32) if far_dtd is None else far_dtd
        for name, samples in zip(SIGNALS, (capture, far, silent, out), strict=True):
            self._audio[name].write(np.asarray(samples, np.float32).tobytes())
            self._audio[name].flush()
        self._blocks.write("\t".join(str(int(v)) if isinstance(v, bool) else str(v) for v in state) + "\n")
        self._blocks.flush()

    def close(self) -> None:
        for handle in self._audio.values():
            handle.close()
        self._blocks.close()


def load_dump(folder: Path) -> tuple[dict[str, NDArray[np.float32]], NDArray[np.float64]]:
    """The SIGNALS and the blocks (one row per block, COLUMNS) of a dump (a dump from before `out` lacks it)."""
    audio = {name: np.fromfile(path, np.float32) for name in SIGNALS if (path := folder / f"{name}.f32").exists()}
    blocks = np.loadtxt(folder / "blocks.tsv", delimiter="\t", skiprows=1, ndmin=2)
    return audio, blocks
