"""Would a linear echo estimate tell a voice under the answer's echo sooner than the coherence does? A study on the
echo dumps `voicecli bench duplex --keep-audio` keeps (voicecli.audio.echo_dump), not product code.

Why: in double talk AEC3's output holds the user's voice 50-70 dB down while the far end sounds (its suppressor), so
the voice detector hears nothing until the answer pauses; the coherence of the raw microphone with the far end
(voicecli.audio.double_talk) tells it late or not at all under a +6 dB echo, where a loud syllable of the answer
keeps the capture 0.9 coherent. A linear filter from the far end to the microphone predicts the echo; what it does
not predict (the residual) is the user's voice at nearly its own level, and the echo's room tail is predicted too.
The bindings do not expose AEC3's own linear output, so this is a small partitioned-block frequency-domain NLMS of
its own, two of them (Ochiai's two-path scheme): a background filter that always adapts and a foreground that copies
it only while it cancels better, so a voice that derails the background never reaches the measure.

Fed what the app's canceller fed its double-talk detector live (the dump's capture and far_dtd: the far end
`lead` samples ahead of the echo's bulk delay, silent until a delay is aligned), it flags a 10 ms block when the
foreground's linear cancellation (capture over residual, dB) falls DROP_DB below its own running median over the
far end alone, for FLAG_BLOCKS blocks in a row, while the far end plays. Flags are laid on the session's microphone
recording as scripts/false_holds.py lays the live output, and counted against the run's results: onsets in answers
nobody interrupted (each would pause an answer) and the first flag onset in each interruption, from the user's first
voiced sample; beside them, the live coherence detector's (the dump's `double_talk` state).
Usage: .venv/bin/python results/bench/linear-residual-20261207/linear_residual.py KEEP_DIR=RUN_DIR [...]
   or: ... linear_residual.py --course DUMP_DIR FROM_S TO_S (the cancellation over time, and the restarts)
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from false_holds import BLOCK, Heard, interruption_spans, live_double_talk, print_heard, session_samples

from voicecli.audio.echo_dump import COLUMNS, load_dump
from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.duplex import DOUBLE_TALK, live_output, load_session

PART = 160
"""Samples per block and per filter partition (10 ms, the app's microphone block)."""
PARTS = 16
"""Partitions: 160 ms of taps, the 20 ms lead and the room's tail."""
MU = 0.5
NORM = float(PARTS)
"""The step's normalisation: the far end's power per bin times this."""
FAR_DBFS = -45.0
"""The far end counts as playing above this level (per block)."""
DROP_DB = 10.0
FLAG_BLOCKS = 3
BASELINE_BLOCKS = 300
"""Blocks of the far end alone whose median cancellation is the baseline (3 s)."""
COPY_BLOCKS = 10
"""The background replaces the foreground after cancelling better over this many blocks in a row."""


def _db(power: float) -> float:
    return float(10 * np.log10(power + 1e-12))


class LinearEcho:
    """A partitioned-block frequency-domain NLMS from the far end to the microphone (overlap-save, constrained)."""

    def __init__(self) -> None:
        self.weights = np.zeros((PARTS, PART + 1), np.complex128)
        self.spectra = np.zeros((PARTS, PART + 1), np.complex128)
        self.power = np.full(PART + 1, 1e-6)
        self.previous = np.zeros(PART, np.float64)

    def push(self, far: NDArray[np.float64]) -> None:
        """The far end's next block: its spectrum joins the history every filter reads."""
        frame = np.concatenate([self.previous, far])
        self.previous = far
        self.spectra = np.roll(self.spectra, 1, axis=0)
        self.spectra[0] = np.fft.rfft(frame)
        self.power = 0.9 * self.power + 0.1 * np.abs(self.spectra[0]) ** 2

    def residual(self, mic: NDArray[np.float64], weights: NDArray[np.complex128]) -> NDArray[np.float64]:
        estimate = np.fft.irfft((weights * self.spectra).sum(axis=0))[PART:]
        return mic - estimate

    def adapt(self, error: NDArray[np.float64]) -> None:
        spectrum = np.fft.rfft(np.concatenate([np.zeros(PART), error]))
        gradient = np.conj(self.spectra) * spectrum / (NORM * self.power + 1e-6)
        taps = np.fft.irfft(gradient, axis=1)
        taps[:, PART:] = 0.0  # constrained: the second half would wrap around
        self.weights += MU * np.fft.rfft(taps, axis=1)


@dataclass(frozen=True)
class Step:
    """One 10 ms block of a dump through the two filters: its first sample, the far end's, the microphone's and the
    foreground residual's levels (dBFS), and whether the filters started over before it."""

    start: int
    far_db: float
    mic_db: float
    residual_db: float
    restarted: bool


def steps(audio: dict[str, NDArray[np.float32]], blocks: NDArray[np.float64]) -> Iterator[Step]:
    """A dump (`load_dump`), block by block through the two filters (restarted when the canceller's alignment
    changes: the far end it read jumped)."""
    capture, far = audio["capture"].astype(np.float64), audio["far_dtd"].astype(np.float64)
    ends = np.cumsum(blocks[:, COLUMNS.index("samples")])
    echo, foreground, better = LinearEcho(), np.zeros((PARTS, PART + 1), np.complex128), 0
    alignment: tuple[float, float] | None = None
    for start in range(0, len(capture) - PART + 1, PART):
        row = blocks[min(int(np.searchsorted(ends, start, "right")), len(blocks) - 1)]
        now = (float(row[COLUMNS.index("aligned")]), float(row[COLUMNS.index("shift")]))
        restarted = now != alignment
        if restarted:
            echo, foreground, better, alignment = LinearEcho(), np.zeros((PARTS, PART + 1), np.complex128), 0, now
        mic, ref = capture[start : start + PART], far[start : start + PART]
        echo.push(ref)
        back, fore = echo.residual(mic, echo.weights), echo.residual(mic, foreground)
        far_db, back_db, fore_db = (_db(float(np.mean(v**2))) for v in (ref, back, fore))
        playing = far_db > FAR_DBFS
        if playing:
            echo.adapt(back)
        better = better + 1 if playing and back_db < fore_db - 0.5 else 0
        if better >= COPY_BLOCKS:
            foreground, better = echo.weights.copy(), 0
        yield Step(start, far_db, _db(float(np.mean(mic**2))), fore_db, restarted)


def flags(folder: Path) -> NDArray[np.float32]:
    """Per dump sample, 1.0 where the linear residual flags a voice under the echo."""
    audio, blocks = load_dump(folder)
    told = np.zeros(len(audio["capture"]), np.float32)
    baseline: deque[float] = deque(maxlen=BASELINE_BLOCKS)
    low = 0
    for step in steps(audio, blocks):
        if step.restarted:
            baseline.clear()
            low = 0
        cancel = step.mic_db - min(step.residual_db, step.mic_db)
        if step.far_db <= FAR_DBFS or step.mic_db < -50.0:
            low = 0
            continue
        if len(baseline) >= BASELINE_BLOCKS // 3 and cancel < statistics.median(baseline) - DROP_DB:
            low += 1
        else:
            low = 0
            baseline.append(cancel)
        if low >= FLAG_BLOCKS:
            told[step.start : step.start + PART] = 1.0
    return told


def course(folder: Path, start_s: float, stop_s: float) -> None:
    """The foreground's cancellation every 0.5 s of far end between two dump times (seconds of samples), and where
    the filters started over: how fast it converges and how long it holds the echo."""
    restarts: list[float] = []
    lines: list[str] = []
    shown = -1.0
    for step in steps(*load_dump(folder)):  # one pass: the filters are the costly part
        at = step.start / SPEECH_RATE
        if step.restarted:
            restarts.append(at)
        if start_s <= at < stop_s and step.far_db > FAR_DBFS and step.mic_db > -50.0 and at - shown >= 0.5:
            shown = at
            lines.append(f"{at:.2f} s\tfar {step.far_db:.1f}\tmicrophone {step.mic_db:.1f}\t"
                         f"cancelled {step.mic_db - step.residual_db:.1f} dB")
    print("restarted at", " ".join(f"{at:.1f}" for at in restarts))
    print("\n".join(lines))


def main(arguments: list[str]) -> int:
    if arguments[:1] == ["--course"]:
        course(Path(arguments[1]), float(arguments[2]), float(arguments[3]))
        return 0
    echo_only = {"linear": 0, "coherence": 0}
    heard: dict[str, list[Heard]] = {"linear": [], "coherence": []}
    for argument in arguments:
        keep, _, run = argument.partition("=")
        results = json.loads((Path(run) / "results.json").read_text())
        for path in sorted(Path(keep).glob("*.npz")):
            session, spans = load_session(path)
            folder = path.with_suffix("")
            told = flags(folder)
            placed = live_output(session, folder, told)
            assert placed is not None
            per_block = {"linear": [bool(placed[end - 1] > 0.5) for end in range(BLOCK, len(placed) + 1, BLOCK)],
                         "coherence": live_double_talk(session, folder)}
            interruptions = interruption_spans(session, session_samples(path, results))
            for name, blocks in per_block.items():
                starts = [i for i, on in enumerate(blocks) if on and (i == 0 or not blocks[i - 1])]
                for i in starts:
                    frame = (i + 1) * BLOCK
                    if any(a <= frame <= b for a, b in spans):
                        echo_only[name] += 1
                        print(f"{Path(keep).name}/{path.stem}: {name} flag in an answer nobody interrupted at "
                              f"{frame / SPEECH_RATE:.1f} s")
                for share, first, last in interruptions:
                    if share is None:
                        continue
                    found = [(i + 1) * BLOCK for i in starts if first <= (i + 1) * BLOCK <= last]  # a flag's onset
                    ms = (found[0] - first) / SPEECH_RATE * 1000 if found else None
                    heard[name].append((share, ms))
                    if share >= DOUBLE_TALK:
                        print(f"{Path(keep).name}/{path.stem}: {name}, double talk {share:.0%} at "
                              f"{first / SPEECH_RATE:.1f} s: {'-' if ms is None else f'{ms:.0f} ms'}")
    for name in ("linear", "coherence"):
        print(f"{name}: {echo_only[name]} flags in answers nobody interrupted")
        print_heard("told", heard[name])
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
