"""Speculative turns end to end: the real endpoint over one WebSocket, the real boto3 Bedrock client on a stand-in.

The listener's events (SpokenDraft, DraftWithdrawn, SpokenTurn) are given as the Listener emits them; what is checked
is what the user would hear and what the model would remember: no audio, no shown turn and no history from an answer
that was withdrawn, the cancel sent on the same connection, and a confirmed answer played whole.

The tests that use the real endpoint are in the slow tier (their `transports` fixture puts them there, see
tests/conftest.py); the second half of this file gives the fast tier the same behaviours on fakes (tests/fakes/: a
scripted LLM and a tone transport), plus barge-in and the drafts that must start nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable

import pytest

from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.tts import ToneTransport, audio_seconds
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.config import Config
from voicecli.converse.pipeline import (
    PipelineEvent,
    PipelineSettings,
    SpeculationState,
    TurnFinished,
    TurnStarted,
    VoicePipeline,
)
from voicecli.converse.turn_taking import TurnTaker
from voicecli.listen.listener import BargeIn, DraftWithdrawn, HoldVoice, ReleaseVoice, SpokenDraft, SpokenTurn
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import TTSTransport
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import SAMPLE_RATE

pytestmark = pytest.mark.usefixtures("dummy_aws_credentials")

QUESTION = "What is the capital of France?"
ANSWER = ["The capital of France", " is Paris.", " It lies on the Seine,", " and it is a large city."]



class Setup:
    def __init__(self, bedrock: BedrockStandIn, transports: dict[str, TTSTransport]) -> None:
        self.events: list[PipelineEvent] = []
        self.sink = CollectingSink()
        llm = BedrockLLM(dataclasses.replace(Config.defaults().llm.bedrock, endpoint_url=bedrock.url))
        settings = PipelineSettings(first_fragment_words=0, min_sentence_chars=0)
        self.pipeline = VoicePipeline(llm, transports, self.sink, settings, Conversation(), self.events.append)
        self.taker = TurnTaker(self.pipeline)
        self.socket = transports["bidi"]
        assert isinstance(self.socket, WebSocketTransport)

    def of(self, kind: type) -> list[PipelineEvent]:
        return [e for e in self.events if isinstance(e, kind)]

    async def held_audio(self, timeout_s: float = 120.0) -> None:
        """Wait until the speculative answer has decoded audio waiting behind its hold."""
        deadline = time.monotonic() + timeout_s
        while not (self.pipeline._current is not None and self.pipeline._current.speculation is not None
                   and self.pipeline._current.speculation.held_audio):
            assert time.monotonic() < deadline, "no speculative audio was made"
            await asyncio.sleep(0.02)


def draft(text: str = QUESTION, turn: int = 1) -> SpokenDraft:
    now = time.monotonic()
    return SpokenDraft(text, {"speech_start": now - 2.0, "speech_end": now - 0.25, "transcript_ready": now}, turn)


def final(text: str = QUESTION, turn: int = 1) -> SpokenTurn:
    now = time.monotonic()
    marks = {"speech_start": now - 2.3, "speech_end": now - 0.55, "turn_confirmed": now, "transcript_ready": now}
    return SpokenTurn(text, marks, 2.0, turn)


async def test_confirmed_speculation_is_held_then_played_whole(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    bedrock.queue(standin.Reply(deltas=ANSWER))
    setup = Setup(bedrock, transports)
    async with setup.taker as taker:
        taker.on_listen(draft())
        await setup.held_audio()
        # Thinking ahead: audio exists, yet nothing is heard, shown or remembered, and a user still talking is not
        # taken for a barge-in.
        assert setup.sink.audio().size == 0 and not setup.of(TurnStarted) and len(setup.pipeline.history) == 0
        assert not setup.pipeline.speaking
        assert [e.state for e in setup.of(SpeculationState)] == ["started"]  # type: ignore[attr-defined]
        taker.on_listen(final())
        await asyncio.wait_for(taker.drained(), 120)
    finished = setup.of(TurnFinished)
    assert len(finished) == 1 and isinstance(finished[0], TurnFinished)
    timeline = finished[0].timeline
    counts = timeline.speculations
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 1, 0)
    assert "turn_confirmed" in timeline.marks and "first_audio_played" in timeline.marks
    assert timeline.marks["first_audio_played"] >= timeline.marks["turn_confirmed"]
    assert setup.sink.audio().size / SAMPLE_RATE > 2.0
    assert [m.role for m in setup.pipeline.history.all_messages()] == ["user", "assistant"]
    assert [e.state for e in setup.of(SpeculationState)] == ["started", "confirmed"]  # type: ignore[attr-defined]
    assert len(bedrock.requests) == 1  # the speculative answer WAS the answer: generated once


async def test_resumed_speech_cancels_the_answer_unheard_on_the_same_connection(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    never = threading.Event()
    longer = "What is the capital of France and of Spain?"
    # Held before its 4th delta: the first sentence is complete (the 3rd delta starts the next one) and spoken on hold
    # while the LLM is still mid-answer, so the withdrawal must cancel a live LLM stream and a live synthesis.
    bedrock.queue(standin.Reply(deltas=ANSWER, hold_at=3, release=never, hold_timeout_s=60),
                  standin.Reply(deltas=["Paris and Madrid."]))
    setup = Setup(bedrock, transports)
    try:
        async with setup.taker as taker:
            taker.on_listen(draft())
            await setup.held_audio()  # the LLM is held mid-answer, its first sentence already synthesized
            assert not setup.of(TurnFinished)  # the LLM is still held mid-answer
            taker.on_listen(DraftWithdrawn(1))
            await asyncio.wait_for(taker.drained(), 60)
            assert setup.sink.audio().size == 0
            assert not setup.of(TurnStarted) and not setup.of(TurnFinished)
            assert len(setup.pipeline.history) == 0
            assert [e.state for e in setup.of(SpeculationState)] == ["started", "cancelled"]  # type: ignore[attr-defined]
            taker.on_listen(final(longer))
            await asyncio.wait_for(taker.drained(), 120)
    finally:
        never.set()
    assert setup.socket.reconnects == 0  # the cancel travelled on the one WebSocket, which then served the answer
    started = setup.of(TurnStarted)
    assert [e.user_text for e in started] == [longer]  # type: ignore[attr-defined]
    finished = setup.of(TurnFinished)
    assert len(finished) == 1 and isinstance(finished[0], TurnFinished) and finished[0].answer == "Paris and Madrid."
    counts = finished[0].timeline.speculations
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 0, 1)
    assert [m.content for m in setup.pipeline.history.all_messages()] == [longer, "Paris and Madrid."]
    # Only the confirmed answer was heard: about the length of "Paris and Madrid.", not the withdrawn sentences.
    assert 0.5 < setup.sink.audio().size / SAMPLE_RATE < 3.0


async def test_a_changed_final_transcript_replaces_the_speculative_answer(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=["Madrid."]))
    setup = Setup(bedrock, transports)
    async with setup.taker as taker:
        taker.on_listen(draft("What is the capital of France?"))
        await setup.held_audio()
        taker.on_listen(final("What is the capital of Spain?"))
        await asyncio.wait_for(taker.drained(), 120)
    assert [e.user_text for e in setup.of(TurnStarted)] == ["What is the capital of Spain?"]  # type: ignore[attr-defined]
    assert [m.content for m in setup.pipeline.history.all_messages()] == ["What is the capital of Spain?", "Madrid."]
    second = bedrock.requests[1].body["messages"]
    assert [m["content"][0]["text"] for m in second] == ["What is the capital of Spain?"]
    assert setup.socket.reconnects == 0 and setup.sink.audio().size / SAMPLE_RATE < 2.5


async def test_a_typed_line_drops_a_speculative_answer(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=["Hello there."]))
    setup = Setup(bedrock, transports)
    async with setup.taker as taker:
        taker.on_listen(draft())
        await setup.held_audio()
        taker.submit("Hello?")
        await asyncio.wait_for(taker.drained(), 120)
    assert [e.user_text for e in setup.of(TurnStarted)] == ["Hello?"]  # type: ignore[attr-defined]
    assert [m.content for m in setup.pipeline.history.all_messages()] == ["Hello?", "Hello there."]


async def test_closing_while_a_failed_speculation_waits_for_its_verdict_returns(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    """A speculative answer whose LLM failed before any sentence waits for the end of turn to report it; closing
    the app meanwhile must not hang (the pipeline used to swallow its own task's cancellation)."""
    bedrock.queue(standin.throttled_mid_stream(after=0))
    setup = Setup(bedrock, transports)
    taker = setup.taker
    taker.start()
    taker.on_listen(draft())
    deadline = time.monotonic() + 60
    while not (setup.pipeline._current is not None and setup.pipeline._current.llm_finished.is_set()):
        assert time.monotonic() < deadline, "the speculative turn never started"
        await asyncio.sleep(0.02)
    await asyncio.wait_for(taker.aclose(), 10)
    assert setup.sink.audio().size == 0 and not setup.of(TurnStarted)


# ------------------------------------------------------------------------------------------------- fast tier
# The behaviours above on fakes: the scripted LLM and the tone transport (its MP3 decoded for real) under the
# real pipeline and turn taker.


class FakeSetup:
    """A turn taker over a pipeline of fakes. `async with` connects the transport and starts the taker."""

    def __init__(self, *replies: Reply, speculate: bool = True, sink: CollectingSink | None = None) -> None:
        self.events: list[PipelineEvent] = []
        self.sink = sink or CollectingSink()
        self.llm = ScriptedLLM(*replies)
        self.transport = ToneTransport()
        settings = PipelineSettings(first_fragment_words=0, min_sentence_chars=0)
        self.pipeline = VoicePipeline(self.llm, {"bidi": self.transport}, self.sink, settings, Conversation(),
                                      self.events.append)
        self.taker = TurnTaker(self.pipeline, speculate=speculate)

    async def __aenter__(self) -> FakeSetup:
        await self.transport.connect()
        self.taker.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.wait_for(self.taker.aclose(), 10)
        await self.transport.aclose()

    def of[E](self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def states(self) -> list[str]:
        return [e.state for e in self.of(SpeculationState)]

    def heard_s(self) -> float:
        return self.sink.audio().size / SAMPLE_RATE

    def history(self) -> list[str]:
        return [m.content for m in self.pipeline.history.all_messages()]

    async def held_audio(self) -> None:
        """Wait until the speculative answer has decoded audio waiting behind its hold."""
        await wait_until(lambda: self.pipeline._current is not None and self.pipeline._current.speculation is not None
                         and bool(self.pipeline._current.speculation.held_audio))

    async def drained(self) -> None:
        await asyncio.wait_for(self.taker.drained(), 10)


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.005)


ANSWER_SENTENCES = ("The capital of France is Paris.", "It lies on the Seine, and it is a large city.")


async def test_fake_confirmed_speculation_is_held_then_played_whole() -> None:
    async with FakeSetup(Reply(ANSWER)) as setup:
        setup.taker.on_listen(draft())
        await setup.held_audio()
        # Thinking ahead: audio exists, yet nothing is heard, shown or remembered, and a user still talking is not
        # taken for a barge-in.
        assert setup.heard_s() == 0 and not setup.of(TurnStarted) and len(setup.pipeline.history) == 0
        assert not setup.pipeline.speaking and setup.states() == ["started"]
        setup.taker.on_listen(final())
        await setup.drained()
    [finished] = setup.of(TurnFinished)
    timeline = finished.timeline
    counts = timeline.speculations
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 1, 0)
    assert timeline.utterance == 1 and timeline.to_json()["utterance"] == 1  # the microphone's id for the turn
    assert timeline.marks["first_audio_played"] >= timeline.marks["turn_confirmed"]
    assert setup.heard_s() == pytest.approx(sum(map(audio_seconds, ANSWER_SENTENCES)), abs=0.1)
    assert [m.role for m in setup.pipeline.history.all_messages()] == ["user", "assistant"]
    assert setup.states() == ["started", "confirmed"]
    assert len(setup.llm.calls) == 1 and setup.transport.cancels == []  # generated once, nothing dropped


async def test_fake_resumed_speech_cancels_the_answer_unheard_on_the_same_connection() -> None:
    never = asyncio.Event()
    longer = "What is the capital of France and of Spain?"
    # Held before its 4th delta: the first sentence is complete and spoken on hold while the LLM is mid-answer, so
    # the withdrawal must cancel a live LLM stream and a live synthesis.
    async with FakeSetup(Reply(ANSWER, hold_at=3, release=never), Reply(["Paris and Madrid."])) as setup:
        setup.taker.on_listen(draft())
        await setup.held_audio()
        assert setup.llm.calls[0].held and not setup.of(TurnFinished)
        setup.taker.on_listen(DraftWithdrawn(1))
        await setup.drained()
        assert setup.heard_s() == 0 and not setup.of(TurnStarted) and not setup.of(TurnFinished)
        assert len(setup.pipeline.history) == 0 and setup.states() == ["started", "cancelled"]
        assert setup.llm.calls[0].closed_early and setup.transport.cancels == [None]
        setup.taker.on_listen(final(longer))
        await setup.drained()
    assert setup.transport.connects == 1  # the cancel travelled on the one connection, which then served the answer
    assert [e.user_text for e in setup.of(TurnStarted)] == [longer]
    [finished] = setup.of(TurnFinished)
    assert finished.answer == "Paris and Madrid." and finished.timeline.utterance == 1  # answered from scratch
    counts = finished.timeline.speculations
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 0, 1)
    assert setup.history() == [longer, "Paris and Madrid."]
    assert setup.heard_s() == pytest.approx(audio_seconds("Paris and Madrid."), abs=0.05)  # only what was confirmed


async def test_fake_a_changed_final_transcript_replaces_the_speculative_answer() -> None:
    async with FakeSetup(Reply(ANSWER), Reply(["Madrid."])) as setup:
        setup.taker.on_listen(draft("What is the capital of France?"))
        await setup.held_audio()
        setup.taker.on_listen(final("What is the capital of Spain?"))
        await setup.drained()
    assert [e.user_text for e in setup.of(TurnStarted)] == ["What is the capital of Spain?"]
    assert setup.history() == ["What is the capital of Spain?", "Madrid."]
    assert [m.content for m in setup.llm.calls[1].messages] == ["What is the capital of Spain?"]
    assert setup.transport.connects == 1 and setup.heard_s() == pytest.approx(audio_seconds("Madrid."), abs=0.05)


async def test_fake_a_typed_line_drops_a_speculative_answer() -> None:
    async with FakeSetup(Reply(ANSWER), Reply(["Hello there."])) as setup:
        setup.taker.on_listen(draft())
        await setup.held_audio()
        setup.taker.submit("Hello?")
        await setup.drained()
    assert [e.user_text for e in setup.of(TurnStarted)] == ["Hello?"]
    assert setup.history() == ["Hello?", "Hello there."] and setup.states() == ["started", "cancelled"]


async def test_fake_closing_while_a_failed_speculation_waits_for_its_verdict_returns() -> None:
    """As test_closing_while_a_failed_speculation_waits_for_its_verdict_returns above: closing must not hang."""
    setup = FakeSetup(Reply([], fail_at=0))
    await setup.transport.connect()
    setup.taker.start()
    setup.taker.on_listen(draft())
    await wait_until(lambda: setup.pipeline._current is not None and setup.pipeline._current.llm_finished.is_set())
    await asyncio.wait_for(setup.taker.aclose(), 5)
    await setup.transport.aclose()
    assert setup.heard_s() == 0 and not setup.of(TurnStarted)


async def test_fake_a_barge_in_stops_the_answer_and_keeps_what_was_heard() -> None:
    never = asyncio.Event()
    async with FakeSetup(Reply(ANSWER, hold_at=3, release=never), Reply(["Yes?"])) as setup:
        setup.taker.submit("Tell me about Paris.")
        await wait_until(lambda: setup.heard_s() > 0)
        assert setup.pipeline.speaking
        setup.taker.on_listen(BargeIn(time.monotonic()))
        await setup.drained()
        [finished] = setup.of(TurnFinished)
        assert finished.interrupted and finished.spoken == ANSWER_SENTENCES[0]
        assert setup.transport.cancels == [None] and setup.llm.calls[0].closed_early
        setup.taker.submit("Wait.")
        await setup.drained()
    assert setup.history() == ["Tell me about Paris.", ANSWER_SENTENCES[0] + "…", "Wait.", "Yes?"]


class HoldingSink(CollectingSink):
    """A sink that can hold its voice (playback.sinks.Holdable), saying what it was asked to do."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def hold(self) -> None:
        self.calls.append("hold")

    def release(self) -> None:
        self.calls.append("release")

    def stop(self) -> None:
        self.calls.append("stop")


async def test_fake_a_held_voice_plays_on_when_released_and_stops_at_a_barge_in() -> None:
    """HoldVoice pauses the speaker, ReleaseVoice plays on (the answer is whole, not interrupted); a hold that a
    barge-in answers ends in a stop. A sink that cannot hold (CollectingSink) is left alone."""
    never = asyncio.Event()
    sink = HoldingSink()
    async with FakeSetup(Reply(ANSWER), Reply(ANSWER, hold_at=3, release=never), sink=sink) as setup:
        setup.taker.submit("Tell me about Paris.")
        await wait_until(lambda: setup.heard_s() > 0)
        setup.taker.on_listen(HoldVoice(time.monotonic()))
        setup.taker.on_listen(ReleaseVoice(time.monotonic()))
        await setup.drained()
        assert sink.calls == ["hold", "release"]
        assert not setup.of(TurnFinished)[0].interrupted
        setup.taker.submit("And Rome?")
        await wait_until(lambda: len(setup.of(TurnStarted)) == 2 and setup.pipeline.speaking)
        setup.taker.on_listen(HoldVoice(time.monotonic()))
        setup.taker.on_listen(BargeIn(time.monotonic()))
        await setup.drained()
        assert sink.calls[2] == "hold" and "stop" in sink.calls[3:]
        assert setup.of(TurnFinished)[1].interrupted
    async with FakeSetup(Reply(ANSWER)) as plain:
        plain.taker.submit("Tell me about Paris.")
        await wait_until(lambda: plain.heard_s() > 0)
        plain.taker.on_listen(HoldVoice(time.monotonic()))
        plain.taker.on_listen(ReleaseVoice(time.monotonic()))
        await plain.drained()
        assert not plain.of(TurnFinished)[0].interrupted


async def test_fake_a_draft_never_interrupts_an_answer_and_speculation_can_be_off() -> None:
    never = asyncio.Event()
    async with FakeSetup(Reply(ANSWER, hold_at=3, release=never)) as setup:
        setup.taker.submit("Tell me about Paris.")
        await wait_until(lambda: setup.pipeline.speaking and setup.heard_s() > 0)
        setup.taker.on_listen(draft("And Rome?", turn=2))  # the user speaks over the answer: a guess starts nothing
        await asyncio.sleep(0.05)
        assert setup.states() == [] and len(setup.llm.calls) == 1 and setup.pipeline.speaking
        never.set()
        await setup.drained()
    async with FakeSetup(Reply(["Rome is in Italy."]), speculate=False) as quiet:
        quiet.taker.on_listen(draft("Where is Rome?"))
        await asyncio.sleep(0.05)
        assert not quiet.llm.calls and quiet.states() == []
        quiet.taker.on_listen(final("Where is Rome?"))
        await quiet.drained()
    assert quiet.history() == ["Where is Rome?", "Rome is in Italy."]


async def test_fake_a_withdrawal_of_another_utterance_leaves_the_speculation_alone() -> None:
    async with FakeSetup(Reply(ANSWER)) as setup:
        setup.taker.on_listen(draft(turn=3))
        await setup.held_audio()
        setup.taker.on_listen(DraftWithdrawn(2))  # about an earlier utterance: not this draft's
        setup.taker.on_listen(final(turn=3))
        await setup.drained()
    assert setup.states() == ["started", "confirmed"] and setup.history()[0] == QUESTION


async def test_fake_a_barge_in_between_the_confirmation_and_the_release_plays_nothing() -> None:
    """The end of turn is confirmed and, before the pipeline has handed over the held answer, the user barges in:
    the answer is interrupted with nothing heard (the held audio is not played after the interruption)."""
    async with FakeSetup(Reply(ANSWER)) as setup:
        setup.taker.on_listen(draft())
        await setup.held_audio()
        setup.taker.on_listen(final())  # confirmed; the release runs at the event loop's next turn
        await setup.taker.interrupt()  # the barge-in comes first
        await setup.drained()
    [finished] = setup.of(TurnFinished)
    assert finished.interrupted and finished.spoken == "" and setup.heard_s() == 0
    assert setup.states() == ["started", "confirmed"]  # it was the user's turn: confirmed, then cut before a word
