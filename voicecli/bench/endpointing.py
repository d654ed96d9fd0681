"""`voicecli bench endpointing`: end-of-turn detectors on labelled pauses, the wait at real ends vs cut-offs.

What is labelled: every question of a built-in set is spoken whole (the voices, rates and noise of
voicecli.bench.questions.voicing_for), split at the word boundaries where the set marks a "|" and joined by exact
silences, so where each hesitation lies is known, not guessed; after the last word comes the real end. (Spoken
whole, not phrase by phrase as the other benches join them: a phrase synthesized alone ends with the falling voice
of a finished sentence, which would teach nothing about hesitations, where a person's voice says "more to come".)
The app's own VAD (Silero, the Endpointer's thresholds and hysteresis) is then run over the audio, and every
silence it hears inside the utterance is a decision a detector must get right: a mid-sentence pause (an inserted
hesitation, or a natural gap inside a phrase, both NOT the end) or the final silence (the end).

The signals are read once per silence, PROBE_MS into it (as the app would, on the audio up to that moment): the
draft transcript (tiny.en as configured in [stt], via voicecli.listen.transcription) and its verdict
(voicecli.listen.turn_completion.classify), SmolLM2's probability that the words end the message
(voicecli.listen.turn_likelihood), and Smart Turn v3.2's probability (voicecli.listen.smart_turn). Then
each detector is a function of its parameters and those signals that says at how much silence it would end the
turn; it is simulated on the whole parameter grid (pure arithmetic, no model runs again):
  silence   end after W ms of silence.
  text      the app's rule today (TurnEndPolicy: complete / unsure / incomplete hang-overs).
  lm        the same hang-overs, the words judged by SmolLM2 instead of the rules (turn.words = "smollm2",
            voicecli.listen.turn_likelihood; its two thresholds swept too).
  prosody   Smart Turn alone: end at W ms if p >= threshold, else at the long bound L (Pipecat's way).
  fused     voicecli.listen.end_of_turn (silence + text + prosody).
A cut-off is a mid-sentence silence at which the detector ended the turn before speech resumed; the cut-off rate is
cut-offs / mid-sentence silences. The wait is the time from the real end of speech (the last sample of the last
segment) to the decision: the VAD's own lag plus the silence the detector wanted. Each parameter point gives (cut-off
rate, p50 wait); the curve is the best wait at each cut-off rate, and "wait at <= 2% / 5%" reads it there (LiveKit's
eot-bench measure). The best point at a rate is chosen on the set measured (an oracle threshold, as eot-bench does),
so compare the figures at the DEFAULT parameters too, above all on `holdout`, which nothing was tuned on.
Not included: the time the signals take to compute (measured and reported, p50 per signal beside the table).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench.charts import cutoff_curve_chart
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.progress import BenchProgress
from voicecli.bench.question_sets import SETS, TUNED_ON
from voicecli.bench.report import BenchResult, default_name, run_bench
from voicecli.bench.target import BenchError, pick_named
from voicecli.config import Config, TurnSettings
from voicecli.errors import UserError
from voicecli.listen.end_of_turn import end_after_ms
from voicecli.listen.turn_completion import Completion, TurnEndPolicy
from voicecli.listen.turn_likelihood import asks_model, words_verdict

DETECTORS: tuple[str, ...] = ("silence", "text", "lm", "prosody", "fused")
PROBE_MS = 200
"""Silence (ms, as the VAD counts it) at which the draft transcript and the prosody are read: the earliest a
signal-based detector can decide (a pause shorter than this cannot be cut off by them)."""
MIN_SILENCE_MS = 100
"""VAD silences shorter than this (the gaps inside words) are no decision: no detector ends a turn that early."""
ENDPOINTING_PAUSES_MS: tuple[float, ...] = (500.0, 900.0, 400.0, 1200.0, 700.0, 1500.0, 600.0, 1000.0, 800.0)
"""The hesitations of the `endpointing` set, in turn: 400-1,500 ms, a person thinking mid-sentence. Other sets keep
the pauses they are voiced with everywhere (voicecli.bench.questions)."""
MIN_PIECE_MS = 200
"""No cut leaves less than this of speech between two hesitations (one short word)."""
TRAIL_S = 1.0
"""Silence voiced after the last segment: room for the probe after the real end."""
VAD_THRESHOLD = 0.5
"""The Endpointer's default; silence starts below threshold - 0.15 and lasts until a window reaches threshold."""
VAD_WINDOW = 512
CUTOFF_TARGETS = (0.02, 0.05)
ANCHORS: tuple[tuple[str, str], ...] = (
    ("LiveKit turn detector v1 (cloud)", "543"),
    ("LiveKit turn detector v1-mini", "1,070"),
    ("Pipecat Smart Turn v3.2", "1,051"),
    ("silence only", "1,600"),
)
"""LiveKit's eot-bench (English): the wait after the user really stopped at <= 5% cut-offs."""

_WAITS = tuple(range(100, 3001, 50))
_SLOW = tuple(range(800, 3001, 200))
_THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
_WORD_THRESHOLDS = (0.01, 0.02, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)


@dataclass
class Event:
    """One silence a detector must judge: mid-sentence (end=False) or the real end."""

    utterance: str
    end: bool
    label: str
    """"hesitation" (an inserted pause), "natural" (a gap inside a segment) or "end"."""
    start_ms: float
    """Where the VAD's silence starts, from the start of the file."""
    silence_ms: float
    """How long the silence lasts (a mid-sentence one; for the end: to the end of the file)."""
    lag_ms: float = 0.0
    """The end only: VAD silence start - the real end of speech."""
    text: str | None = None
    completion: str | None = None
    probability: float | None = None
    """Smart Turn's: the voice sounds finished."""
    likelihood: float | None = None
    """SmolLM2's: the words end the message (None where the rules hear them unfinished, or no words)."""


@dataclass
class Labelled:
    """An utterance at 16 kHz and where its inserted pauses and its real end of speech are (ms from the start)."""

    name: str
    text: str
    audio: NDArray[np.float32]
    joins_ms: list[tuple[float, float]]
    speech_end_ms: float
    voicing: dict[str, Any] = field(default_factory=dict)


# --- the curve: pure arithmetic over the events ------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One parameter setting of a detector, scored on the events."""

    params: tuple[tuple[str, Any], ...]
    cutoff_rate: float
    cutoffs: int
    wait_p50_ms: float
    wait_p95_ms: float


def score(pause_lengths: Sequence[float], pause_decisions: Sequence[float], end_lags: Sequence[float],
          end_decisions: Sequence[float], params: tuple[tuple[str, Any], ...] = ()) -> Point:
    """A detector's decisions (silence, in ms, at which it ends the turn) scored: a mid-sentence silence is cut off
    when the decision comes before it ends; the wait at an end is the VAD lag plus the decision."""
    cutoffs = sum(1 for length, at in zip(pause_lengths, pause_decisions, strict=True) if at < length)
    waits = sorted(lag + at for lag, at in zip(end_lags, end_decisions, strict=True))
    rate = cutoffs / len(pause_lengths) if pause_lengths else 0.0
    p50 = statistics.median(waits) if waits else float("nan")
    p95 = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))] if waits else float("nan")
    return Point(params, rate, cutoffs, p50, p95)


def frontier(points: Iterable[Point]) -> list[Point]:
    """The curve: the points no other beats on both cut-off rate and p50 wait, by rising cut-off rate."""
    best: list[Point] = []
    for point in sorted(points, key=lambda p: (p.cutoff_rate, p.wait_p50_ms)):
        if not best or point.wait_p50_ms < best[-1].wait_p50_ms:
            best.append(point)
    return best


def wait_at(curve: Sequence[Point], max_rate: float) -> Point | None:
    """The quickest point whose cut-off rate is at most `max_rate` (None: none is that safe)."""
    safe = [p for p in curve if p.cutoff_rate <= max_rate + 1e-12]
    return min(safe, key=lambda p: p.wait_p50_ms) if safe else None


# --- the detectors: the silence at which each ends the turn, given one event's signals ----------------------------


Decider = Callable[[Event], float]


def _completion(event: Event) -> Completion | None:
    return None if event.completion is None else Completion(event.completion)


def _signal_decision(wait_ms: float) -> float:
    """Signals are read at PROBE_MS: nothing that depends on them can happen sooner."""
    return max(float(wait_ms), float(PROBE_MS))


def silence_detector(wait_ms: int) -> Decider:
    return lambda event: float(wait_ms)


def text_detector(policy: TurnEndPolicy) -> Decider:
    def decide(event: Event) -> float:
        if event.text is None:  # the silence ended before the draft was read
            return float(policy.default_ms)
        return _signal_decision(policy.silence_ms(event.text))
    return decide


def lm_detector(policy: TurnEndPolicy, complete_at: float, incomplete_below: float) -> Decider:
    def decide(event: Event) -> float:
        completion = _completion(event)
        if completion is None:  # the silence ended before the draft was read
            return float(policy.default_ms)
        verdict = words_verdict(completion, event.likelihood, complete_at, incomplete_below)
        return _signal_decision(policy.hang_over(verdict))
    return decide


def prosody_detector(threshold: float, wait_ms: int, long_ms: int) -> Decider:
    def decide(event: Event) -> float:
        if event.probability is None:
            return float(long_ms)
        return _signal_decision(wait_ms if event.probability >= threshold else long_ms)
    return decide


def fused_detector(settings: TurnSettings) -> Decider:
    def decide(event: Event) -> float:
        if event.probability is None and event.completion is None:
            return float(settings.max_ms)
        completion = _completion(event)
        if completion is not None and settings.words == "smollm2":  # as the app judges the words
            completion = words_verdict(completion, event.likelihood, settings.words_complete_probability,
                                       settings.words_incomplete_probability)
        return _signal_decision(end_after_ms(completion, event.probability, settings))
    return decide


def grid(detector: str, config: Config) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the default parameters, every parameter setting simulated) of a detector."""
    audio = config.audio
    if detector == "silence":
        return {"wait_ms": audio.vad_silence_ms}, [{"wait_ms": w} for w in _WAITS]
    text_default: dict[str, Any] = {"complete_ms": audio.turn_end_complete_ms, "default_ms": audio.vad_silence_ms,
                                    "incomplete_ms": audio.turn_end_incomplete_ms}
    if detector == "text":
        steps = range(200, 3001, 100)
        return text_default, [{"complete_ms": c, "default_ms": d, "incomplete_ms": i}
                              for c, d, i in product(steps, steps, _SLOW) if c <= d <= i]
    if detector == "lm":
        turn = config.turn
        default = {**text_default, "complete_probability": turn.words_complete_probability,
                   "incomplete_probability": turn.words_incomplete_probability}
        steps = range(200, 2001, 100)
        return default, [{"complete_ms": c, "default_ms": d, "incomplete_ms": i, "complete_probability": hi,
                          "incomplete_probability": lo}
                         for c, d, i, hi, lo in product(steps, steps, _SLOW, _WORD_THRESHOLDS, _WORD_THRESHOLDS)
                         if c <= d <= i and lo <= hi]
    if detector == "prosody":
        # Pipecat's defaults: > 0.5 at the VAD's 200 ms stop, else its 3 s stop_secs.
        return ({"threshold": 0.5, "wait_ms": PROBE_MS, "long_ms": 3000},
                [{"threshold": t, "wait_ms": w, "long_ms": long}
                 for t, w, long in product(_THRESHOLDS, range(200, 2001, 100), _SLOW) if w <= long])
    if detector == "fused":
        words = (config.turn.words, config.turn.words_complete_probability, config.turn.words_incomplete_probability)
        return (asdict(config.turn),
                [asdict(TurnSettings(a, o, u, h, m, c, i, *words))
                 for a, o, u, h, m, c, i in product((200, 300, 400, 600, 800, 1000, 1200, 1500),
                                                    (400, 600, 800, 1000, 1200, 1500),
                                                    (600, 800, 1000, 1200, 1500, 2000),
                                                    (1000, 1200, 1400, 1600, 2000, 2500), (1600, 2000, 2500, 3000),
                                                    (0.3, 0.5, 0.7, 0.9, 0.95), (0.02, 0.05, 0.1, 0.2, 0.3))
                 if a <= o <= u <= h <= m and i <= c])
    raise ValueError(f"unknown detector {detector!r}")


def decider(detector: str, params: dict[str, Any]) -> Decider:
    if detector == "silence":
        return silence_detector(params["wait_ms"])
    if detector in ("text", "lm"):
        policy = TurnEndPolicy(default_ms=params["default_ms"], complete_ms=params["complete_ms"],
                               incomplete_ms=params["incomplete_ms"])
        if detector == "text":
            return text_detector(policy)
        return lm_detector(policy, params["complete_probability"], params["incomplete_probability"])
    if detector == "prosody":
        return prosody_detector(params["threshold"], params["wait_ms"], params["long_ms"])
    if detector == "fused":
        return fused_detector(TurnSettings(**params))
    raise ValueError(f"unknown detector {detector!r}")


def evaluate(events: Sequence[Event], detector: str, params: dict[str, Any]) -> Point:
    decide = decider(detector, params)
    pauses = [e for e in events if not e.end]
    ends = [e for e in events if e.end]
    return score([e.silence_ms for e in pauses], [decide(e) for e in pauses], [e.lag_ms for e in ends],
                 [decide(e) for e in ends], tuple(params.items()))


def summarize_detector(events: Sequence[Event], detector: str, config: Config) -> dict[str, Any]:
    """The detector's default point, its curve, and the wait at <= 2% and <= 5% cut-offs."""
    default, settings = grid(detector, config)
    curve = frontier(evaluate(events, detector, params) for params in settings)
    at_default = evaluate(events, detector, default)
    summary: dict[str, Any] = {
        "utterances": len({e.utterance for e in events}),
        "pauses": sum(1 for e in events if not e.end),
        "ends": sum(1 for e in events if e.end),
        "default": default,
        "cutoff_rate_at_default": at_default.cutoff_rate,
        "cutoffs_at_default": at_default.cutoffs,
        "wait_p50_at_default_ms": at_default.wait_p50_ms,
        "wait_p95_at_default_ms": at_default.wait_p95_ms,
        "curve": [_point_json(p) for p in curve],
    }
    for target in CUTOFF_TARGETS:
        point = wait_at(curve, target)
        key = f"{round(target * 100)}pct"
        summary[f"wait_at_{key}_ms"] = None if point is None else point.wait_p50_ms
        summary[f"params_at_{key}"] = None if point is None else dict(point.params)
    return summary


def _point_json(point: Point) -> dict[str, Any]:
    return {"cutoff_rate": point.cutoff_rate, "cutoffs": point.cutoffs, "wait_p50_ms": point.wait_p50_ms,
            "wait_p95_ms": point.wait_p95_ms, "params": dict(point.params)}


# --- the labelled audio --------------------------------------------------------------------------------------------


def word_boundary(full: NDArray[np.float32], prefix_len: int, after: int = 0) -> int:
    """Where, in the whole sentence's audio, the prefix ends: the quietest 30 ms between 75% of the length of the
    prefix spoken alone (which runs longer, its last word lengthened as a final one) and that length + 50 ms, at
    least MIN_PIECE_MS after the previous cut and before the end."""
    hop, size = SPEECH_RATE // 100, 3 * SPEECH_RATE // 100
    piece = round(MIN_PIECE_MS * SPEECH_RATE / 1000)
    low = max(after + piece, round(0.75 * prefix_len))
    high = min(len(full) - piece - size, prefix_len + 5 * hop)
    if high <= low:
        return min(max(after + piece, prefix_len), len(full) - piece)
    starts = range(low, high, hop)
    energies = [float(np.mean(full[i:i + size] ** 2)) for i in starts]
    return starts[int(np.argmin(energies))] + size // 2


def _fade(segment: NDArray[np.float32]) -> NDArray[np.float32]:
    """5 ms fades at both ends of a piece cut out of a sentence: no click where the silence is inserted."""
    ramp = min(len(segment) // 2, SPEECH_RATE // 200)
    if ramp == 0:
        return segment
    out = segment.copy()
    out[:ramp] *= np.linspace(0.0, 1.0, ramp, dtype=np.float32)
    out[-ramp:] *= np.linspace(1.0, 0.0, ramp, dtype=np.float32)
    return out


def _voice(set_name: str, work: Path, endpoint_url: str | None, token: str,
           progress: Callable[[str], None]) -> list[Labelled]:
    """A built-in set at 16 kHz with its hesitations known: each question is spoken WHOLE (so the words before a
    pause keep the voice of a sentence that goes on, as a person's do when they hesitate; a phrase spoken alone
    ends with the falling voice of a finished one, which no speaker uses mid-sentence), then split where each
    "|" falls (word_boundary) and joined by exact silences."""
    from voicecli.audio.resample import resample
    from voicecli.bench.audio_marks import trim
    from voicecli.bench.questions import (
        ESPEAK,
        LEAD_IN_S,
        PAUSES_MS,
        QUALITY_PAUSES_MS,
        add_noise,
        espeak_speech,
        kokoro_speech,
        voicing_for,
    )

    pauses = {"latency": PAUSES_MS, "endpointing": ENDPOINTING_PAUSES_MS}.get(set_name, QUALITY_PAUSES_MS)
    work.mkdir(parents=True, exist_ok=True)
    labelled: list[Labelled] = []
    pause_index = 0
    specs = SETS[set_name]
    for index, spec in enumerate(specs):
        progress(f"voicing {index + 1}/{len(specs)} of the {set_name} set")
        voicing = voicing_for(set_name, index)

        def speak(text: str, voice: str = voicing.voice, speed: float = voicing.speed) -> NDArray[np.float32]:
            if voice == ESPEAK:
                audio, rate = espeak_speech(text, work, speed)
            else:
                if endpoint_url is None:
                    raise BenchError("voicing with Kokoro needs the endpoint's URL")
                audio, rate = kokoro_speech(text, voice, speed, endpoint_url, token)
            return np.asarray(resample(trim(audio, rate), rate, SPEECH_RATE), dtype=np.float32)

        full = speak(spec.text)
        cuts: list[int] = []
        for count in range(1, len(spec.segments)):
            prefix = len(speak(" ".join(spec.segments[:count])))
            cuts.append(word_boundary(full, prefix, cuts[-1] if cuts else 0))
        pieces = [full[a:b] for a, b in zip([0, *cuts], [*cuts, len(full)], strict=True)]
        parts: list[NDArray[np.float32]] = []
        joins: list[tuple[float, float]] = []
        position = round(LEAD_IN_S * SPEECH_RATE)
        for number, piece in enumerate(pieces):
            if number > 0:
                gap = round(SPEECH_RATE * pauses[pause_index % len(pauses)] / 1000)
                pause_index += 1
                joins.append((position * 1000 / SPEECH_RATE, (position + gap) * 1000 / SPEECH_RATE))
                parts.append(np.zeros(gap, dtype=np.float32))
                position += gap
            parts.append(_fade(piece) if len(pieces) > 1 else piece)
            position += len(piece)
        speech_end_ms = position * 1000 / SPEECH_RATE
        samples = np.concatenate([np.zeros(round(LEAD_IN_S * SPEECH_RATE), dtype=np.float32), *parts,
                                  np.zeros(round(TRAIL_S * SPEECH_RATE), dtype=np.float32)])
        if voicing.noise_snr_db is not None:
            samples = add_noise(samples, SPEECH_RATE, voicing.noise_snr_db, seed=index)
        labelled.append(Labelled(f"q{index + 1:02d}", spec.text, samples, joins, speech_end_ms, voicing.describe()))
    return labelled


def _from_directory(directory: Path, work: Path) -> list[Labelled]:
    """A user's WAVs: no joins known; the real end is the last audible sample (voicecli.bench.audio_marks)."""
    import soundfile

    from voicecli.audio.resample import resample
    from voicecli.bench.questions import from_directory

    labelled = []
    for question in from_directory(directory, work):
        data, rate = soundfile.read(str(question.path), dtype="float32")
        audio = resample(np.asarray(data, dtype=np.float32), int(rate), SPEECH_RATE).astype(np.float32)
        audio = np.concatenate([audio, np.zeros(round(TRAIL_S * SPEECH_RATE), dtype=np.float32)])
        labelled.append(Labelled(question.name, question.text, audio, [], question.voiced_end_s * 1000))
    return labelled


def vad_silences(probabilities: Sequence[float], threshold: float = VAD_THRESHOLD) -> list[tuple[int, int]]:
    """(first window, windows) of each silence after speech began, as the Endpointer counts one: it starts at a
    window below threshold - 0.15 and lasts until a window reaches threshold. The last one runs to the end."""
    low = max(threshold - 0.15, 0.01)
    silences: list[tuple[int, int]] = []
    started = False
    run_start: int | None = None
    for index, prob in enumerate(probabilities):
        if prob >= threshold:
            if run_start is not None:
                silences.append((run_start, index - run_start))
                run_start = None
            started = True
        elif started and run_start is None and prob < low:
            run_start = index
    if run_start is not None:
        silences.append((run_start, len(probabilities) - run_start))
    return silences


def spans_joins(event: Event, joins_ms: Sequence[tuple[float, float]]) -> int:
    """How many inserted pauses the silence overlaps: more than one means the word between them was lost."""
    end = event.start_ms + event.silence_ms
    return sum(1 for a, b in joins_ms if a < end and event.start_ms < b)


def events_of(item: Labelled, probabilities: Sequence[float]) -> list[Event]:
    """The silences of one utterance as events: every one but the last is mid-sentence; the last is the end."""
    window_ms = VAD_WINDOW * 1000 / SPEECH_RATE
    silences = vad_silences(probabilities)
    events: list[Event] = []
    for number, (first, count) in enumerate(silences):
        start, length = first * window_ms, count * window_ms
        if number == len(silences) - 1:
            events.append(Event(item.name, True, "end", start, length, start - item.speech_end_ms))
        elif length >= MIN_SILENCE_MS:
            inserted = any(a - 4 * window_ms <= start <= b for a, b in item.joins_ms)
            events.append(Event(item.name, False, "hesitation" if inserted else "natural", start, length))
    return events


# --- the run -------------------------------------------------------------------------------------------------------


def parse_detectors(value: str | None) -> list[str]:
    if not value:
        return list(DETECTORS)
    try:
        return pick_named(value, {name: name for name in DETECTORS}, "--detectors")
    except BenchError as exc:
        raise UserError(str(exc)) from None


async def _labelled(args: argparse.Namespace, config: Config, work: Path,
                    progress: Callable[[str], None]) -> tuple[list[Labelled], str]:
    import asyncio

    from voicecli.bench.questions import needs_endpoint
    from voicecli.bench.target import resolve_target

    if args.questions is not None:
        return _from_directory(Path(args.questions), work), str(args.questions)
    set_name = args.question_set or args.default_set
    kind = "tuned on" if set_name in TUNED_ON else "never tuned on"
    source = f"built-in set {set_name!r} ({len(SETS[set_name])} utterances, {kind})"
    if not needs_endpoint(set_name):
        return await asyncio.to_thread(_voice, set_name, work, None, "", progress), source
    target = await resolve_target(config, progress)
    try:
        items = await asyncio.to_thread(_voice, set_name, work, target.url, target.token, progress)
    finally:
        target.close()
    return items, source


def measure_signals(items: Sequence[Labelled], config: Config, detectors: Sequence[str],
                    bar: BenchProgress) -> tuple[list[Event], dict[str, list[float]]]:
    """Run the VAD over each utterance, then read the draft and the prosody PROBE_MS into every silence."""
    from voicecli.listen.endpointing import SileroVad
    from voicecli.listen.turn_completion import classify

    need_text = any(d in ("text", "lm", "fused") for d in detectors)
    need_prosody = any(d in ("prosody", "fused") for d in detectors)
    transcriber = smart_turn = words = None
    if need_text:
        from voicecli.listen.transcription import transcriber_from_config

        bar.describe("loading Whisper")
        transcriber = transcriber_from_config(config)
        transcriber.warm_up()
    if need_prosody:
        from voicecli.listen.smart_turn import SmartTurn

        bar.describe("loading Smart Turn")
        smart_turn = SmartTurn(config.models_dir)
    if "lm" in detectors or (need_text and config.turn.words == "smollm2"):
        from voicecli.listen.turn_likelihood import TurnLikelihood

        bar.describe("loading SmolLM2")
        words = TurnLikelihood.from_config(config)
    vad = SileroVad()
    timings: dict[str, list[float]] = {"draft_ms": [], "words_ms": [], "prosody_ms": []}
    events: list[Event] = []
    probe = round(PROBE_MS * SPEECH_RATE / 1000)
    for item in items:
        bar.describe(f"signals of {item.name}")
        vad.reset()
        usable = len(item.audio) - len(item.audio) % VAD_WINDOW
        probabilities = [vad(item.audio[i:i + VAD_WINDOW]) for i in range(0, usable, VAD_WINDOW)]
        for event in events_of(item, probabilities):
            if event.silence_ms >= PROBE_MS or event.end:
                until = item.audio[: round(event.start_ms * SPEECH_RATE / 1000) + probe]
                if transcriber is not None:
                    started = time.perf_counter()
                    event.text = transcriber.transcribe_sync(until, speculative=True).text
                    timings["draft_ms"].append((time.perf_counter() - started) * 1000)
                    rules = classify(event.text)
                    event.completion = rules.value
                    if words is not None and asks_model(rules, event.text):
                        started = time.perf_counter()
                        event.likelihood = words.probability(event.text)
                        timings["words_ms"].append((time.perf_counter() - started) * 1000)
                if smart_turn is not None:
                    started = time.perf_counter()
                    event.probability = smart_turn.probability(until)
                    timings["prosody_ms"].append((time.perf_counter() - started) * 1000)
            events.append(event)
        bar.step()
    if transcriber is not None:
        transcriber.close()
    if words is not None:
        words.close()
    return events, timings


async def _bench(args: argparse.Namespace, config: Config) -> BenchResult:
    import asyncio
    import tempfile

    detectors = parse_detectors(args.detectors)
    with BenchProgress(None, "bench endpointing") as bar, tempfile.TemporaryDirectory() as scratch:
        items, source = await _labelled(args, config, Path(scratch), bar.note)
        bar.set_total(len(items))
        machine = machine_info()
        events, timings = await asyncio.to_thread(measure_signals, items, config, detectors, bar)
        finish_machine_info(machine)
    joins = {item.name: item.joins_ms for item in items}
    for event in events:
        if not event.end and spans_joins(event, joins[event.utterance]) > 1:
            event.label = "lost-word"
    scored = [e for e in events if e.label != "lost-word"]
    summary = {detector: summarize_detector(scored, detector, config) for detector in detectors}
    result = BenchResult("endpointing", args.name or default_name("endpointing"),
                         {"source": source, "detectors": detectors, "probe_ms": PROBE_MS,
                          "min_silence_ms": MIN_SILENCE_MS, "stt_model": config.stt.model,
                          "signal_p50_ms": {k: statistics.median(v) for k, v in timings.items() if v}},
                         machine)
    result.extra = {"summary_by_detector": summary,
                    "utterances": [{"name": i.name, "text": i.text, "voicing": i.voicing,
                                    "joins_ms": i.joins_ms, "speech_end_ms": i.speech_end_ms} for i in items],
                    "events": [asdict(e) for e in events]}
    lost = [f"{e.utterance} {e.silence_ms:,.0f} ms" for e in events if e.label == "lost-word"]
    check = (f"Not scored: {len(lost)} mid-sentence silences that span two inserted pauses ({', '.join(lost)}): "
             "the word between two cuts came out too short or too quiet for the VAD (a voicing fault, not a "
             "hesitation the set asks for); they stay in results.json as label lost-word."
             if lost else "No silence spans two inserted pauses (no word lost between cuts).")
    result.notes = [f"Questions: {source}.", NOTE, check]
    return result


NOTE = ("A cut-off: the detector ended the turn at a mid-sentence silence (an inserted hesitation or a natural gap "
        "the VAD heard) before speech resumed; rate = cut-offs / mid-sentence silences. Wait: real end of speech -> "
        "decision (the VAD's lag + the silence the detector wanted), p50 over the utterances. The wait at <= X% "
        "is the best parameter point at that rate on THIS set (an oracle threshold, as eot-bench reads it); the "
        "default columns are the parameters as shipped. Signals are read PROBE_MS into a silence; their compute "
        "time is not added (listed below).")


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def render_markdown(result: BenchResult) -> str:
    summary = result.extra["summary_by_detector"]
    lines = [f"# bench endpointing: {result.name}", "", result.notes[0], "",
             "| detector | utterances | silences judged (mid / end) | wait at <= 2% cut-offs | wait at <= 5% | "
             "default: cut-off rate | default: cut-offs | default: wait p50 | default: wait p95 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for detector, row in summary.items():
        lines.append(f"| {detector} | {row['utterances']} | {row['pauses']} / {row['ends']} | "
                     f"{_ms(row['wait_at_2pct_ms'])} | {_ms(row['wait_at_5pct_ms'])} | "
                     f"{row['cutoff_rate_at_default'] * 100:.1f}% | {row['cutoffs_at_default']} | "
                     f"{_ms(row['wait_p50_at_default_ms'])} | {_ms(row['wait_p95_at_default_ms'])} |")
    lines += ["", "Anchors (LiveKit eot-bench, English, wait at <= 5% cut-offs; other audio, other machine):", "",
              "| detector | wait at <= 5% (ms) |", "|---|---:|"]
    lines += [f"| {name} | {ms} |" for name, ms in ANCHORS]
    lines += ["", "Curve (best p50 wait at each cut-off rate on this set):", ""]
    for detector, row in summary.items():
        points = ", ".join(f"{p['cutoff_rate'] * 100:.1f}% -> {p['wait_p50_ms']:,.0f} ms" for p in row["curve"])
        lines.append(f"- {detector}: {points}")
    lines += ["", "Parameters at <= 2% / <= 5% and the defaults:", ""]
    for detector, row in summary.items():
        lines.append(f"- {detector}: 2%: {row['params_at_2pct']}; 5%: {row['params_at_5pct']}; "
                     f"default: {row['default']}")
    signal = result.settings.get("signal_p50_ms", {})
    lines += ["", f"Signals read {result.settings['probe_ms']} ms into each silence; compute p50 here: "
              + (", ".join(f"{k} {v:,.0f} ms" for k, v in signal.items()) or "none") + ".", "", result.notes[1],
              "", result.notes[2],
              "", f"Machine: {result.machine.get('cpu_model')} ({result.machine.get('cpus_usable')} usable cores), "
              f"commit {result.machine.get('git_commit')}.", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    """curve.png: p50 wait vs cut-off rate per detector (the best point at each rate)."""
    return [cutoff_curve_chart(result.name, result.extra["summary_by_detector"], CUTOFF_TARGETS,
                               directory / "curve.png")]


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.listen.smart_turn import SmartTurnModelMissing
    from voicecli.listen.transcription import WhisperModelMissing
    from voicecli.listen.turn_likelihood import TurnModelMissing
    from voicecli.tts.local_endpoint import EndpointStartError

    parse_detectors(args.detectors)
    run_bench(_bench(args, config), Path(args.out), render_markdown, charts,
              (BenchError, EndpointStartError, SmartTurnModelMissing, TurnModelMissing, WhisperModelMissing))
    return 0
