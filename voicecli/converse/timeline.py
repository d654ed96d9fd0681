"""One latency timeline per turn, on one monotonic clock, running alongside the whole data flow.

Every stage stamps its mark here as it happens (speech end, transcript, first token, first sentence, first audio
byte, first audio played...). The TUI draws the marks live, the session log keeps them as JSONL, and `voicecli
bench` reads the same spans, so there is exactly one definition of "how long did it take".
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TURN_MARKS: tuple[str, ...] = (
    "speech_start",
    "speech_end",
    "transcript_ready",
    "turn_confirmed",
    "llm_request",
    "llm_first_token",
    "first_sentence_ready",
    "tts_first_request_sent",
    "first_audio_byte",
    "first_audio_played",
    "llm_done",
    "turn_done",
)
"""Marks in the order a turn normally passes them (llm_done may come before or after first audio). A turn answered
speculatively passes turn_confirmed (the endpointer's end of turn) later, anywhere before first_audio_played: its
answer is generated while the user's pause is still being judged, and only playback waits for the confirmation."""

KEY_SPANS: tuple[tuple[str, str, str], ...] = (
    ("end of input -> transcript", "speech_end", "transcript_ready"),
    ("LLM time to first token", "llm_request", "llm_first_token"),
    ("first token -> first sentence", "llm_first_token", "first_sentence_ready"),
    ("sentence -> first audio byte", "tts_first_request_sent", "first_audio_byte"),
    ("first byte -> first played", "first_audio_byte", "first_audio_played"),
    ("time to first audio", "input_done", "first_audio_played"),
    ("LLM total", "llm_request", "llm_done"),
)
"""Spans shown as session percentiles. "input_done" is speech_end for a spoken turn, llm_request for a typed one."""


@dataclass
class SentenceMarks:
    """One sentence of an answer on its way through TTS."""

    index: int
    text: str
    sent: float | None = None
    first_byte: float | None = None
    done: float | None = None
    audio_s: float = 0.0
    server_first_audio_ms: float | None = None
    """The endpoint's own time from receiving the request to sending its first audio, when its transport reports
    it: the client's wait (sent -> first_byte) minus this is the network's share."""


@dataclass
class SpeculationCounts:
    """Answers started at a pause for one user turn: confirmed (played) or cancelled (speech resumed, or the final
    transcript differed) and never heard."""

    started: int = 0
    confirmed: int = 0
    cancelled: int = 0


@dataclass(frozen=True)
class Mark:
    """Emitted when a turn passes a mark: what the TUI waterfall listens to. It carries the turn's (live) timeline,
    so a listener draws the waterfall from the events it receives and never asks the pipeline for the turn."""

    turn_id: int
    name: str
    at: float
    ms_since_start: float
    timeline: TurnTimeline = field(repr=False, compare=False)


@dataclass
class TurnTimeline:
    """The marks of one turn. The first stamp of a mark wins: later ones (e.g. a retry) do not move it."""

    turn_id: int
    mode: str
    origin: str
    """"spoken" or "typed"."""
    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)
    sentences: list[SentenceMarks] = field(default_factory=list)
    interrupted: bool = False
    speculations: SpeculationCounts = field(default_factory=SpeculationCounts)
    utterance: int | None = None
    """A spoken turn's number from the endpointer: the one id the turn has from the microphone (its drafts, its
    speculations, its final transcript) to this timeline and the latency log."""
    underruns: int = 0
    """Times the speaker ran dry while the answer was still coming (a gap heard inside it; sinks.AudioSink)."""
    listener: Callable[[Mark], None] | None = field(default=None, repr=False, compare=False)

    def mark(self, name: str, at: float | None = None) -> None:
        if name not in TURN_MARKS:
            raise ValueError(f"unknown mark {name!r}")
        if name in self.marks:
            return
        stamp = time.monotonic() if at is None else at
        self.marks[name] = stamp
        if self.listener is not None:
            self.listener(Mark(self.turn_id, name, stamp, (stamp - self.origin_time) * 1000, self))

    @property
    def origin_time(self) -> float:
        """Where the turn's clock starts: end of speech when spoken, the request when typed."""
        return self.marks.get("speech_end", self.marks.get("llm_request", self.started))

    def ms(self, start: str, end: str) -> float | None:
        """Milliseconds between two marks, None when either is missing."""
        if start == "input_done":
            start = "speech_end" if "speech_end" in self.marks else "llm_request"
        if start not in self.marks or end not in self.marks:
            return None
        return (self.marks[end] - self.marks[start]) * 1000

    def relative(self) -> dict[str, float]:
        """Each mark as ms from the turn's origin (negative for speech_start)."""
        origin = self.origin_time
        return {name: (self.marks[name] - origin) * 1000 for name in TURN_MARKS if name in self.marks}

    def ordered(self) -> bool:
        """True when the marks that every complete turn has came in causal order."""
        chain = [m for m in ("speech_start", "speech_end", "transcript_ready", "llm_request", "llm_first_token",
                             "first_sentence_ready", "tts_first_request_sent", "first_audio_byte",
                             "first_audio_played", "turn_done") if m in self.marks]
        return all(self.marks[a] <= self.marks[b] for a, b in itertools.pairwise(chain))

    def to_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "mode": self.mode,
            "origin": self.origin,
            "interrupted": self.interrupted,
            "speculations": asdict(self.speculations),
            "utterance": self.utterance,
            "underruns": self.underruns,
            "marks_ms": {k: round(v, 1) for k, v in self.relative().items()},
            "spans_ms": {label: _round(self.ms(a, b)) for label, a, b in KEY_SPANS},
            "sentences": [
                {**asdict(s), **{k: _round(None if getattr(s, k) is None else (getattr(s, k) - self.origin_time) * 1000)
                                 for k in ("sent", "first_byte", "done")}}
                for s in self.sentences
            ],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


class LatencyLog:
    """Appends each finished turn to a JSONL file, one object per line, so sessions can be compared later."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, turn: TurnTimeline) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"wall_time": time.time(), **turn.to_json()}) + "\n")


@dataclass(frozen=True)
class Percentiles:
    count: int
    p50: float
    p95: float


class SessionStats:
    """p50/p95 of the key spans over the last `window` turns, per mode (so bidi and batch can be compared)."""

    def __init__(self, window: int = 50) -> None:
        self._turns: deque[TurnTimeline] = deque(maxlen=window)

    def add(self, turn: TurnTimeline) -> None:
        self._turns.append(turn)

    def percentiles(self, label: str, mode: str | None = None) -> Percentiles | None:
        start, end = next((a, b) for name, a, b in KEY_SPANS if name == label)
        values = [v for t in self._turns if mode in (None, t.mode) and (v := t.ms(start, end)) is not None]
        return summarize(values)

    def count(self, mode: str) -> int:
        return sum(1 for t in self._turns if t.mode == mode)

    @property
    def modes(self) -> list[str]:
        return sorted({t.mode for t in self._turns})


def summarize(values: Iterable[float]) -> Percentiles | None:
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return Percentiles(1, data[0], data[0])
    cuts = statistics.quantiles(data, n=100, method="inclusive")
    return Percentiles(len(data), cuts[49], cuts[94])
