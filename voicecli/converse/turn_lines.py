"""A conversation's turns as JSON lines: what `voicecli chat --no-tui` writes on stdout, and what `voicecli bench
turns` (or any script) reads back.

One JSON object per line, its "event" saying which:
  {"event": "turn_started", "turn_id": 1, "origin": "spoken", "text": "What is the capital of France?"}
  {"event": "turn_finished", "turn_id": 1, "text": "Paris.", "spoken": "Paris.", "interrupted": false,
   "timeline": {...}}
  {"event": "turn_failed", "turn_id": 1, "text": "the LLM was throttled: ..."}
  {"event": "barge_in", "turn_id": 0, "at": 1234.567}
  {"event": "voice_held", "turn_id": 0, "at": 1234.471}
  {"event": "voice_released", "turn_id": 0, "at": 1234.690}
`timeline` is `TurnTimeline.to_json()`; `spoken` what the history keeps of the answer (after a barge-in, the words
played); `at` the monotonic time the listener detected speech over the answer (barge_in), speech that paused the
answer's voice (voice_held), or that speech fading so the answer played on (voice_released): CLOCK_MONOTONIC, the
same clock in every process of the machine (`voicecli bench duplex` compares it with its recordings). Why JSON
and one module: the bench used to parse the app's prose lines ("you (spoken)> ...") back as strings; now the writer
and the reader share these definitions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from voicecli.converse.pipeline import PipelineEvent, TurnFailed, TurnFinished, TurnStarted

TurnEventName = Literal["turn_started", "turn_finished", "turn_failed", "barge_in", "voice_held", "voice_released"]
AT_EVENTS: tuple[TurnEventName, ...] = ("barge_in", "voice_held", "voice_released")
"""The events that carry only a time (`at`)."""


@dataclass(frozen=True)
class TurnLine:
    """One line: a turn started (`text` is the user's), finished (`text` is the answer) or failed (the reason)."""

    event: TurnEventName
    turn_id: int
    text: str
    origin: str | None = None
    """"typed" or "spoken" (turn_started only)."""
    interrupted: bool = False
    timeline: dict[str, Any] = field(default_factory=dict)
    """The turn's TurnTimeline.to_json() (turn_finished only)."""
    spoken: str | None = None
    """What the history keeps of the answer (turn_finished only)."""
    at: float | None = None
    """When speech over the answer was detected, time.monotonic() (AT_EVENTS only)."""

    def encode(self) -> str:
        body: dict[str, Any] = {"event": self.event, "turn_id": self.turn_id}
        if self.event == "turn_started":
            body.update(origin=self.origin, text=self.text)
        elif self.event == "turn_finished":
            body.update(text=self.text, spoken=self.spoken, interrupted=self.interrupted, timeline=self.timeline)
        elif self.event in AT_EVENTS:
            body.update(at=self.at)
        else:
            body.update(text=self.text)
        return json.dumps(body, ensure_ascii=False)


def line_of(event: PipelineEvent) -> TurnLine | None:
    """The line a pipeline event is written as (None: the event is not part of the transcript)."""
    if isinstance(event, TurnStarted):
        return TurnLine("turn_started", event.turn_id, event.user_text, origin=event.origin)
    if isinstance(event, TurnFinished):
        return TurnLine("turn_finished", event.turn_id, event.answer.strip(), interrupted=event.interrupted,
                        timeline=event.timeline.to_json(), spoken=event.spoken.strip())
    if isinstance(event, TurnFailed):
        return TurnLine("turn_failed", event.turn_id, event.message)
    return None


def read_line(line: str) -> TurnLine | None:
    """The turn a line written by `TurnLine.encode` holds; None for anything else (a blank or foreign line)."""
    try:
        body = json.loads(line)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("event") not in ("turn_started", "turn_finished", "turn_failed",
                                                                *AT_EVENTS):
        return None
    timeline = body.get("timeline")
    spoken, at = body.get("spoken"), body.get("at")
    return TurnLine(body["event"], int(body.get("turn_id", 0)), str(body.get("text", "")),
                    origin=body.get("origin"), interrupted=bool(body.get("interrupted", False)),
                    timeline=timeline if isinstance(timeline, dict) else {},
                    spoken=str(spoken) if spoken is not None else None,
                    at=float(at) if isinstance(at, int | float) else None)
