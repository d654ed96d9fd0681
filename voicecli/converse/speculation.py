"""One speculative answer, from the draft transcript to its verdict: the one object that owns it.

Why one owner: a guess at the user's turn used to be spread over the turn taker (the draft in progress, the queued
turn's draft fields), the pipeline's Hold (the verdict) and the pipeline turn (held audio, held UI events, a
"discarded" flag), and each place counted its own part of started / confirmed / cancelled. A Speculation holds all
of it: the draft (its words and the endpointer's turn number they belong to), what its answer produced while
undecided (UI events and decoded audio, kept back in order), the verdict, and the counts of the user turn it guesses
at (kept on that turn's timeline). The turn taker makes it from a SpokenDraft and decides it; the pipeline answers it
and asks it, for every event and every piece of audio, whether to hold it.

    drafted --confirm()--> confirmed --release()--> released   (the pipeline hands over what was held)
       \
        --withdraw()--> withdrawn                              (held things dropped: never heard, never shown)

A verdict is final: confirming a withdrawn guess, or withdrawing a confirmed one, does nothing and says so (False).
The listening side (which decode of the utterance is the draft) stays with the listener and the transcriber; this
is the answer's side.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from voicecli.audio.pcm import Samples
from voicecli.converse.timeline import SpeculationCounts

__all__ = ["Speculation", "SpeculationError", "State"]

State = Literal["drafted", "confirmed", "released", "withdrawn"]


class SpeculationError(RuntimeError):
    """A step out of order (releasing a guess nobody confirmed): a bug in the caller, never the user's doing."""


@dataclass(eq=False)
class Speculation[Event]:
    """A guess at the user's turn (see the module docstring). `Event` is the pipeline's UI event type."""

    text: str
    utterance: int
    """The endpointer's turn number of the words drafted: only that utterance's SpokenTurn can confirm them."""
    counts: SpeculationCounts = field(default_factory=SpeculationCounts)
    """The counts of the user turn guessed at, shared by every guess at it; this one is counted as started."""
    state: State = field(default="drafted", init=False)
    confirmed_marks: dict[str, float] = field(default_factory=dict, init=False)
    """Marks the confirmation brings (turn_confirmed): they join the answer's timeline when it is released."""
    _held_events: list[Event] = field(default_factory=list, init=False, repr=False)
    _held_audio: list[Samples] = field(default_factory=list, init=False, repr=False)
    _decided: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        self.counts.started += 1

    @property
    def decided(self) -> bool:
        return self.state != "drafted"

    @property
    def holds(self) -> bool:
        """Its answer's events and audio are kept back: undecided, or confirmed but not yet released."""
        return self.state in ("drafted", "confirmed")

    @property
    def withdrawn(self) -> bool:
        return self.state == "withdrawn"

    def confirmed_by(self, utterance: int, text: str) -> bool:
        """Whether a final transcript of `utterance` reading `text` confirms this guess: same utterance, same words
        (an answer to other words is not the answer to these)."""
        return self.state == "drafted" and utterance == self.utterance and text == self.text

    def confirm(self, marks: dict[str, float] | None = None) -> bool:
        """The end of the turn is confirmed with the drafted words. False if already decided."""
        if self.decided:
            return False
        self.state = "confirmed"
        self.confirmed_marks = dict(marks or {})
        self.counts.confirmed += 1
        self._decided.set()
        return True

    def withdraw(self) -> bool:
        """The guess is wrong or unwanted (speech resumed, other words, typed input, a barge-in, closing): what was
        held is dropped. False if already decided."""
        if self.decided:
            return False
        self.state = "withdrawn"
        self._held_events.clear()
        self._held_audio.clear()
        self.counts.cancelled += 1
        self._decided.set()
        return True

    async def verdict(self) -> bool:
        """Wait for the decision; True when confirmed."""
        await self._decided.wait()
        return self.state != "withdrawn"

    @property
    def held_audio(self) -> tuple[Samples, ...]:
        """The decoded audio kept back so far (a copy)."""
        return tuple(self._held_audio)

    def hold_event(self, event: Event) -> None:
        if self.holds:
            self._held_events.append(event)

    def hold_audio(self, samples: Samples) -> None:
        if self.holds:
            self._held_audio.append(samples)

    def release(self) -> tuple[list[Event], list[Samples]]:
        """Hand over what was held, in the order it came (the pipeline plays and shows it now); from here on the
        answer is an ordinary one. Only a confirmed guess is released."""
        if self.state != "confirmed":
            raise SpeculationError(f"only a confirmed speculation is released, not a {self.state} one")
        self.state = "released"
        events, audio = self._held_events, self._held_audio
        self._held_events, self._held_audio = [], []
        return events, audio
