"""Turn taking: typed lines, spoken turns and spoken drafts become pipeline turns, one at a time.

This is the one place both front ends (the TUI and the headless `chat --no-tui`) hand their input to, so a spoken
turn is answered the same way in both:

- a SpokenDraft (the utterance so far, transcribed at a short pause) becomes a Speculation (the one object that owns
  the guess: voicecli.converse.speculation) and its answer starts at once, held:
  the LLM writes, TTS synthesizes, the audio is decoded, nothing is heard or shown;
- the SpokenTurn that confirms the same utterance (same endpointer turn, same words) confirms it: the answer is
  already under way, so the user hears it as soon as the turn is confirmed, or as soon as its first audio exists;
- speech over an answer first holds its voice (HoldVoice: paused, nothing dropped), then either plays it on
  (ReleaseVoice: it faded) or stops it (BargeIn);
- speech that resumes (DraftWithdrawn), a final transcript that differs, a typed line or a barge-in withdraw it:
  cancelled on the same connection, never heard, not in the history; a differing final transcript is then
  answered from scratch;
- the counts (started / confirmed / cancelled, kept by the speculations themselves) ride on the timeline of the
  user turn they belong to.

Speculation only starts when nothing else is being answered or waiting: a draft never interrupts an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from voicecli.converse.pipeline import PipelineEvent, VoicePipeline
from voicecli.converse.speculation import Speculation
from voicecli.converse.timeline import SpeculationCounts
from voicecli.listen.listener import (
    BargeIn,
    DraftWithdrawn,
    HoldVoice,
    ListenEvent,
    ReleaseVoice,
    SpokenDraft,
    SpokenTurn,
)

__all__ = ["TurnTaker"]


@dataclass
class _Pending:
    """A turn waiting for the pipeline: its words, or the guess it answers."""

    text: str
    origin: str
    marks: dict[str, float]
    speculation: Speculation[PipelineEvent] | None = None
    counts: SpeculationCounts = field(default_factory=SpeculationCounts)
    utterance: int | None = None
    """The endpointer's number of a spoken turn (a speculation carries its own)."""


class TurnTaker:
    """Feeds the pipeline one turn at a time from typed input and listener events (see the module docstring)."""

    def __init__(self, pipeline: VoicePipeline, speculate: bool = True) -> None:
        self.pipeline = pipeline
        self.speculate = speculate
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._draft: Speculation[PipelineEvent] | None = None  # the guess queued or being answered, until decided
        self._counts = SpeculationCounts()  # speculation of the user turn in progress
        self._busy = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = False
        self._worker: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="turn-taker")

    async def aclose(self) -> None:
        self._closing = True
        self._discard_draft()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    async def __aenter__(self) -> TurnTaker:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def drained(self) -> None:
        """Wait until every submitted turn has been answered."""
        while not (self._queue.empty() and not self._busy):
            self._idle.clear()
            await self._idle.wait()

    # -- input -----------------------------------------------------------------------------------------------------

    def submit(self, text: str, origin: str = "typed", marks: dict[str, float] | None = None) -> None:
        """Answer this after whatever is being answered (a speculative answer in progress is dropped first)."""
        self._discard_draft()
        self._enqueue(_Pending(text, origin, dict(marks or {})))

    async def interrupt(self) -> None:
        """Barge-in or Esc: stop what is playing now, drop a speculative answer."""
        self._stop_now()
        await self.pipeline.interrupt()

    def _stop_now(self) -> None:
        """The part of an interruption that must not wait for the event loop: silence, and no speculation."""
        self._discard_draft()
        self.pipeline.stop_audio()

    def on_listen(self, event: ListenEvent) -> None:
        """Act on the listener's events that concern turns (levels and 'heard nothing' are the UI's business)."""
        if isinstance(event, SpokenDraft):
            self._draft_started(event)
        elif isinstance(event, DraftWithdrawn):
            if self._draft is not None and self._draft.utterance == event.turn:
                self._discard_draft()
        elif isinstance(event, SpokenTurn):
            self._spoken(event)
        elif isinstance(event, BargeIn):
            self._stop_now()
            task = asyncio.ensure_future(self.pipeline.interrupt())
            task.add_done_callback(_consume)
        elif isinstance(event, HoldVoice):
            self.pipeline.hold_audio()
        elif isinstance(event, ReleaseVoice):
            self.pipeline.release_audio()

    def _draft_started(self, draft: SpokenDraft) -> None:
        if not self.speculate or self._busy or not self._queue.empty() or self._draft is not None:
            return  # never interrupt an answer for a guess
        speculation: Speculation[PipelineEvent] = Speculation(draft.text, draft.turn, self._counts)
        self._draft = speculation
        self._enqueue(_Pending(draft.text, "spoken", dict(draft.marks), speculation, self._counts))

    def _spoken(self, turn: SpokenTurn) -> None:
        draft = self._draft
        if draft is not None and draft.confirmed_by(turn.turn, turn.text):
            self._draft = None
            draft.confirm({"turn_confirmed": turn.marks["turn_confirmed"]} if "turn_confirmed" in turn.marks else {})
            return
        self._discard_draft()
        self._enqueue(_Pending(turn.text, "spoken", dict(turn.marks), counts=self._counts, utterance=turn.turn))

    def _discard_draft(self) -> None:
        draft, self._draft = self._draft, None
        if draft is not None:
            draft.withdraw()

    def _enqueue(self, pending: _Pending) -> None:
        self._idle.clear()
        self._queue.put_nowait(pending)

    # -- the worker ------------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._closing:
            pending = await self._queue.get()
            self._busy = True
            try:
                speculation = pending.speculation
                if speculation is not None and speculation.withdrawn:
                    continue  # withdrawn before it started
                await self.pipeline.turn(pending.text, pending.origin, pending.marks, speculation=speculation,
                                         speculations=pending.counts, utterance=pending.utterance)
                if speculation is None or not speculation.withdrawn:
                    self._counts = SpeculationCounts()  # the user turn is answered: the next one counts anew
            finally:
                self._busy = False
                if self._queue.empty():
                    self._idle.set()


def _consume(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()
