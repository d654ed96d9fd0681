"""A scripted LLM: the `voicecli.llm.base.LLM` interface answering from replies a test queued.

Why: the pipeline and turn taking react to the shape of a stream (when deltas come, where it stops, whether it
fails, whether it is closed early), not to what a model would say. Scripting that shape makes those tests exact
and instant; the real backends keep their own tests against their wire stand-ins (tests/standins/) and the real
models (the slow tier).

A `Reply` lists the deltas; optionally a delay before each one, a point where the stream waits for the test to
release it (`hold_at` + `release`: proves, without timing thresholds, that something happened while the LLM was
still generating), or a point where it raises an LLMError (a backend failing mid-answer). Every `stream()` call
is recorded as a `StreamCall` (the messages it was given, how far it got, whether it was closed early).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

from voicecli.llm.base import END_TURN, ChatMessage, LLMError, LLMThrottled, StreamEnd, StreamEvent, TextDelta


@dataclass(frozen=True)
class Reply:
    """One scripted answer: `deltas` yielded in order, then StreamEnd(`stop_reason`)."""

    deltas: Sequence[str]
    delay_s: float = 0.0
    """Sleep before each delta (a model that takes its time)."""
    hold_at: int | None = None
    """Before yielding delta number `hold_at` (0-based; len(deltas) holds before the end), wait for `release`."""
    release: asyncio.Event | None = None
    fail_at: int | None = None
    """Raise `error` instead of yielding delta number `fail_at` (len(deltas): after the last delta)."""
    error: LLMError = field(default_factory=lambda: LLMThrottled("the scripted LLM is throttled", "try again"))
    stop_reason: str = END_TURN

    def __post_init__(self) -> None:
        if self.hold_at is not None and self.release is None:
            raise ValueError("hold_at needs a release event")


@dataclass
class StreamCall:
    """What one `stream()` call was asked, and how far it got."""

    messages: list[ChatMessage]
    system: str
    max_tokens: int
    temperature: float
    reply: Reply
    yielded: int = 0
    """Deltas handed out so far."""
    held: bool = False
    """It is waiting at `hold_at` right now."""
    ended: bool = False
    """It yielded its StreamEnd."""
    closed_early: bool = False
    """It was closed or cancelled before its StreamEnd (a barge-in, a withdrawn speculation)."""


class ScriptedLLM:
    """Answers each `stream()` call with the next queued `Reply` (see the module docstring).

    A call with no reply queued fails loudly (LookupError): a test that gets an answer it did not script is wrong.
    """

    def __init__(self, *replies: Reply) -> None:
        self._replies: deque[Reply] = deque(replies)
        self.calls: list[StreamCall] = []
        self.closed = False

    def queue(self, *replies: Reply) -> None:
        """Add replies for the next `stream()` calls, in order."""
        self._replies.extend(replies)

    @property
    def unused(self) -> int:
        """Replies queued and never asked for."""
        return len(self._replies)

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        system: str,
        max_tokens: int,
        temperature: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The next reply as a stream (a plain `def` returning the generator, as the protocol declares)."""
        if self.closed:
            raise RuntimeError("ScriptedLLM used after aclose()")
        if not self._replies:
            raise LookupError(f"ScriptedLLM: no reply queued for call {len(self.calls) + 1} ({messages[-1:]})")
        call = StreamCall(list(messages), system, max_tokens, temperature, self._replies.popleft())
        self.calls.append(call)
        return self._play(call)

    async def _play(self, call: StreamCall) -> AsyncGenerator[StreamEvent, None]:
        reply = call.reply
        try:
            for index in range(len(reply.deltas) + 1):
                if index == reply.hold_at and reply.release is not None:
                    call.held = True
                    await reply.release.wait()
                    call.held = False
                if index == reply.fail_at:
                    raise reply.error
                if index == len(reply.deltas):
                    break
                await self._before_delta(reply)
                call.yielded += 1
                yield TextDelta(reply.deltas[index])
            call.ended = True
            yield StreamEnd(reply.stop_reason, input_tokens=sum(len(m.content) for m in call.messages) // 4,
                            output_tokens=len("".join(reply.deltas)) // 4)
        finally:
            call.held = False
            if not call.ended:
                call.closed_early = True

    async def _before_delta(self, reply: Reply) -> None:
        """What happens before each delta: the reply's delay (PausableLLM also waits while paused)."""
        if reply.delay_s > 0:
            await asyncio.sleep(reply.delay_s)

    async def aclose(self) -> None:
        self.closed = True


class PausableLLM(ScriptedLLM):
    """A ScriptedLLM with the embedded model's `pause` / `resume` and `prefill` (voicecli.llm.local.LocalLLM):
    while paused, no delta comes out. The pipeline pauses such an LLM while the first sentence is synthesized
    (PipelineSettings.pause_llm_for_first_audio); `pauses` records the calls in order, `prefills` each context
    read ahead (its messages' texts and the system prompt)."""

    def __init__(self, *replies: Reply) -> None:
        super().__init__(*replies)
        self._running = asyncio.Event()
        self._running.set()
        self.pauses: list[str] = []
        self.prefills: list[tuple[list[str], str]] = []

    async def prefill(self, messages: list[ChatMessage], *, system: str) -> None:
        self.prefills.append(([m.content for m in messages], system))

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        self.pauses.append("pause")
        self._running.clear()

    def resume(self) -> None:
        self.pauses.append("resume")
        self._running.set()

    async def _before_delta(self, reply: Reply) -> None:
        await self._running.wait()
        await super()._before_delta(reply)
