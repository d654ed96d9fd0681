"""How far each restart of the output stream moved the echo's lag, read from the echo dumps `voicecli bench duplex
--keep-audio` keeps (voicecli/audio/echo_dump.py): the capture and the far end exactly as AEC3 was fed them, live.

A restart (every hold and barge-in flushes the device) shows in blocks.tsv as the canceller leaving `settled` (the far
end the restarted stream played reaches the capture). Around each: the GCC-PHAT lag (the canceller's own,
voicecli.audio.echo_delay) of the capture against the far end, over the last clear WINDOW_S ending before the restart
and the first clear one starting at or after it (each confirmed by the window next to it). The canceller's own shift
of the reference (it reads it that much earlier) is added back, so the move printed is the echo's against the
reference's timeline.

The control: the same over each silence of the far end of at least GAP_S with no restart within a second of it (the
gaps between sentences and answers, where the player's stream ran on). The bench's echo path stops writing once the
speaker has been quiet for its delay plus the room's tail plus 0.1 s (voicecli.bench.echo_path.RoomPath.holding),
~0.45-0.5 s, and starts again at the next sound, so its own delay wanders there as it does after a restart; what a
restart moves beyond that is the placement of the restarted stream. Moves of 2 samples (0.125 ms) and more count.
Beside each restart's move, how far the capture's callbacks moved there (`Dump.capture_moved`): had the capture
gained or lost samples at a restart, its callbacks would come that much later or earlier for the same count.
Usage: .venv/bin/python results/bench/stretch-placement-20261206/restart_lags.py KEEP_DIR [KEEP_DIR ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from voicecli.audio.echo_cancel import FAR_ACTIVE_DBFS, FRAME
from voicecli.audio.echo_delay import estimate_delay
from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.levels import rms_dbfs
from voicecli.audio.rates import SPEECH_RATE

COLUMN = {name: index for index, name in enumerate(COLUMNS)}
WINDOW = round(0.5 * SPEECH_RATE)
MAX_LAG = round(0.3 * SPEECH_RATE)
STEP = round(0.05 * SPEECH_RATE)
REACH = round(3.0 * SPEECH_RATE)
"""How far before and after a restart or a gap a clear window is looked for."""
GAP_S = 0.5
MOVED = 2


class Dump:
    """One session's echo dump: the capture, the far end as fed, and the shift per sample."""

    def __init__(self, folder: Path) -> None:
        audio, blocks = load_dump(folder)
        self.capture, self.far = audio["capture"], audio["far"]
        self.ends = np.cumsum(blocks[:, COLUMN["samples"]]).astype(np.int64)
        self.shift = blocks[:, COLUMN["shift"]]
        # each block's callback time less the samples handed on through it: its earliest over a span is where the
        # callbacks lay the capture on the monotonic clock (drifting with the card's clock, a few samples a second)
        self.callbacks = blocks[:, COLUMN["at"]] * SPEECH_RATE - self.ends
        settled = blocks[:, COLUMN["settled"]]
        self.restarts = [int(self.ends[r - 1]) for r in np.flatnonzero((settled[1:] == 0) & (settled[:-1] == 1)) + 1]

    def lag(self, end: int) -> int | None:
        """The echo's lag against the reference's own timeline over the WINDOW ending at sample `end`, if clear."""
        if end - WINDOW - MAX_LAG < 0 or end > len(self.capture):
            return None
        estimate = estimate_delay(self.capture[end - WINDOW : end], self.far[end - WINDOW - MAX_LAG : end], MAX_LAG)
        if estimate is None or not estimate.clear or estimate.lag >= MAX_LAG - 1:  # at the edge: no echo found
            return None
        return estimate.lag + int(self.shift[min(int(np.searchsorted(self.ends, end)), len(self.shift) - 1)])

    def confirmed(self, ends: range) -> int | None:
        """The lag of the first window of `ends` that the next one confirms (within MOVED): one clear estimate can
        land on a reflection or on the edge of the search."""
        previous = None
        for end in ends:
            lag = self.lag(end)
            if lag is not None and previous is not None and abs(lag - previous) < MOVED:
                return previous
            previous = lag
        return None

    def move(self, before: int, after: int) -> int | None:
        """The confirmed lag scanning forward from the window starting at `after`, less the one scanning back from
        the window ending at `before`."""
        first = self.confirmed(range(before, before - REACH, -STEP))
        then = self.confirmed(range(after + WINDOW, after + WINDOW + REACH, STEP))
        return None if first is None or then is None else then - first

    def capture_moved(self, at: int) -> int | None:
        """How far the capture's callbacks moved across sample `at`: their earliest offset over the 2 s from 1 s
        after it, less over the 2 s before it (samples; positive: later)."""
        def earliest(lo: int, hi: int) -> float | None:
            first, last = (int(np.searchsorted(self.ends, x)) for x in (lo, hi))
            return float(np.min(self.callbacks[first:last])) if last > first else None
        before, after = earliest(at - 2 * SPEECH_RATE, at), earliest(at + SPEECH_RATE, at + 3 * SPEECH_RATE)
        return None if before is None or after is None else round(after - before)

    def gaps(self) -> list[tuple[int, int]]:
        """The far end's silences of GAP_S and more (first and last sample) with no restart within a second."""
        count = len(self.far) // FRAME
        active = [rms_dbfs(self.far[i * FRAME : (i + 1) * FRAME]) > FAR_ACTIVE_DBFS for i in range(count)]
        found, quiet = [], 0
        for i, loud in enumerate(active):
            if not loud:
                quiet += 1
                continue
            start, end = (i - quiet) * FRAME, i * FRAME
            if quiet * FRAME >= GAP_S * SPEECH_RATE and start > 0 and not any(
                    start - SPEECH_RATE <= r <= end + SPEECH_RATE for r in self.restarts):
                found.append((start, end))
            quiet = 0
        return found


def summary(name: str, moves: list[int]) -> str:
    if not moves:
        return f"{name}: none with a clear lag either side"
    a = np.abs(np.array(moves))
    p50 = float(np.median(a))
    return (f"{name}: {len(moves)}, |move| p50 {p50:.0f} samples ({p50 / SPEECH_RATE * 1000:.1f} ms), "
            f"p90 {np.percentile(a, 90):.0f}, max {a.max()}, >= {MOVED} samples at {int(np.sum(a >= MOVED))}")


def main(folders: list[Path]) -> None:
    for folder in folders:
        restarts: list[int] = []
        gaps: list[int] = []
        for path in sorted(p for p in folder.glob("aec-*ms") if p.is_dir()):
            dump = Dump(path)
            here = [m for r in dump.restarts if (m := dump.move(r, r)) is not None]
            quiet = [m for a, b in dump.gaps() if (m := dump.move(a, b)) is not None]
            callbacks = [(dump.move(r, r), dump.capture_moved(r)) for r in dump.restarts]
            print(f"{folder.name}/{path.name}: restarts {here}; silences without one {quiet}; at each restart "
                  f"(the echo's move, the capture callbacks' move) {callbacks}")
            restarts += here
            gaps += quiet
        print(summary(f"{folder.name}, restarts", restarts))
        print(summary(f"{folder.name}, silences of {GAP_S:g} s and more without a restart", gaps))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    main([Path(a) for a in sys.argv[1:]])
