"""Is speech that barges in over an answer the answer's own echo, passed by the canceller? Asked of how coherent the
canceller's output is with the far end, replayed on the echo dumps `voicecli bench duplex --keep-audio` keeps.

For each kept session, the canceller's live output is fed to voicecli.audio.double_talk's detector with the far end
as the app read it for that detector (`far_dtd`, its lags around the echo's delay), block by block as the app fed it
the raw capture, from the first alignment on (the app's starts afresh only when AEC3 does, after that rare; a follow
of the delay moves its far end without a restart). Each 16 ms hop then has the
output's best coherence with the far end, or none (the far end silent, the output quiet, the detector warming up).
The barge-ins the app's listener makes on that output are replayed as scripts/false_holds.py --live does, and each is
described by the hops of the SPAN_MS before it: those in answers nobody interrupted (false barge-ins) against the
first of each interruption (with the share of it the answer's echo sounded under).
Then the rule is replayed: the output silenced in every hop at COHERENT or more (as a gate in front of the voice
detector would, judging each hop by the frame it ends), and the same replay's false barge-ins, echo holds and
interruptions heard are counted with and without it.
Usage: .venv/bin/python results/bench/echo-coherence-20261206/echo_coherence.py KEEP_DIR=RUN_DIR [...]
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from false_holds import (
    Heard,
    Hold,
    interruption_spans,
    interruptions,
    loud,
    print_heard,
    session_holds,
    session_samples,
)

from voicecli.audio.double_talk import FRAME, HOP, DoubleTalkDetector
from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import Session, live_output

SPAN_MS = 224
"""The speech a barge-in is judged on: audio.barge_in_ms of it."""
FIRST_S = 15.0
"""Barge-ins in a session's first seconds are marked: the app's level gate guards there, which the replay lacks."""
COHERENT = 0.5


def output_coherence(folder: Path) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """The dump's output and, per sample, 1 + the best coherence of the output with the far end in the hop it ends
    (0: no frame counted there)."""
    audio, blocks = load_dump(folder)
    out, far = audio["out"], audio["far_dtd"]
    signal = np.zeros(len(out), np.float32)
    detector = DoubleTalkDetector()
    first: int | None = None  # the dump sample the detector's frames count from (the first alignment)
    position = 0
    for row in blocks:
        count = int(row[COLUMNS.index("samples")])
        if first is None and row[COLUMNS.index("aligned")] >= 0:
            first = position
        if first is not None:
            before = detector.frames
            completed = detector.feed(out[position : position + count], far[position : position + count])
            for index, score in enumerate(completed, start=before):
                if score is not None:
                    end = first + index * HOP + FRAME
                    signal[end - HOP : end] = 1.0 + score
        position += count
    return out, signal


@dataclasses.dataclass(frozen=True)
class BargeIn:
    run: str
    session: str
    at_s: float
    echo_only: bool
    over_echo: float | None
    """For an interruption's first barge-in: the share of it over the answer's echo."""
    counted: int
    hops: int
    mean: float | None
    coherent: int
    """Counted hops at COHERENT or more."""


@dataclasses.dataclass
class Tally:
    """One replay's count over all sessions: false barge-ins (past FIRST_S), echo holds, interruptions."""

    false_barge_ins: int = 0
    early_false_barge_ins: int = 0
    echo_holds: int = 0
    heard: list[Heard] = dataclasses.field(default_factory=list)

    def add(self, name: str, session: Session, holds: list[Hold], samples: list[dict[str, Any]]) -> None:
        barges = [h for h in holds if h.barge_in and h.echo_only]
        for barge in barges:
            print(f"{name}: false barge-in at {barge.frame / SPEECH_RATE:.2f} s")
        self.false_barge_ins += sum(h.frame >= FIRST_S * SPEECH_RATE for h in barges)
        self.early_false_barge_ins += sum(h.frame < FIRST_S * SPEECH_RATE for h in barges)
        self.echo_holds += sum(not h.barge_in and h.echo_only and loud(h) for h in holds)
        self.heard += interruptions(session, [h for h in holds if h.barge_in], samples)


def barge_ins(keep: Path, run: Path, plain: Tally, gated: Tally) -> list[BargeIn]:
    results = json.loads((run / "results.json").read_text())
    found: list[BargeIn] = []
    for path in sorted(keep.glob("*.npz")):
        replayed = session_holds(path, live=True)
        if replayed is None:
            continue
        session, holds = replayed
        out, coherence = output_coherence(path.with_suffix(""))
        samples = session_samples(path, results)
        name = f"{run.name}/{path.stem}"
        plain.add(f"{name} replayed as live", session, holds, samples)
        quiet = np.where(coherence >= 1.0 + COHERENT, 0.0, out).astype(np.float32)
        silenced = session_holds(path, live=True, out=quiet)
        assert silenced is not None
        gated.add(f"{name} silenced where coherent", session, silenced[1], samples)
        laid = live_output(session, path.with_suffix(""), coherence)
        assert laid is not None
        spans = interruption_spans(session, samples)
        firsts = {}
        for share, first, last in spans:
            heard = [h for h in holds if h.barge_in and first <= h.frame <= last]
            if heard:
                firsts[heard[0].frame] = share
        span = round(SPAN_MS * SPEECH_RATE / 1000)
        for hold in holds:
            if not hold.barge_in or not (hold.echo_only or hold.frame in firsts):
                continue
            hops = laid[max(0, hold.frame - span) : hold.frame : HOP]
            scores = hops[hops > 0] - 1.0
            found.append(BargeIn(run.name, path.stem, hold.frame / SPEECH_RATE, hold.echo_only,
                                 firsts.get(hold.frame), len(scores), len(hops),
                                 float(np.mean(scores)) if len(scores) else None,
                                 int(np.sum(scores >= COHERENT))))
    return found


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} (median {np.median(values):.2f}, {len(values)})" if values else "none"


def main(arguments: list[str]) -> int:
    found: list[BargeIn] = []
    plain, gated = Tally(), Tally()
    for argument in arguments:
        keep, _, run = argument.partition("=")
        found += barge_ins(Path(keep), Path(run), plain, gated)
    for barge in found:
        print(json.dumps(dataclasses.asdict(barge)))
    groups = (("false barge-ins, first seconds", [b for b in found if b.echo_only and b.at_s < FIRST_S]),
              ("false barge-ins, later", [b for b in found if b.echo_only and b.at_s >= FIRST_S]),
              ("interruptions' first, < 50 % over the echo",
               [b for b in found if not b.echo_only and (b.over_echo or 0.0) < 0.5]),
              ("interruptions' first, >= 50 % over the echo",
               [b for b in found if not b.echo_only and (b.over_echo or 0.0) >= 0.5]))
    for name, group in groups:
        judged = [b for b in group if b.mean is not None]
        print(f"\n{name}: {len(group)}, {len(judged)} with a counted hop; mean coherence "
              f"{spread([b.mean for b in judged if b.mean is not None])}; counted hops "
              f"{spread([float(b.counted) for b in group])}; hops >= {COHERENT:g} "
              f"{spread([float(b.coherent) for b in group])}")
    silenced = f"\nthe output silenced where coherent >= {COHERENT:g}"
    for name, tally in (("\nreplayed as live", plain), (silenced, gated)):
        print(f"{name}: false barge-ins {tally.false_barge_ins} (first {FIRST_S:g} s: {tally.early_false_barge_ins}),"
              f" echo holds within the level rule {tally.echo_holds}")
        print_heard("barged in", tally.heard)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
