"""The conversation pipeline end to end with the real endpoint, and the real boto3 Bedrock client on a stand-in.

The stand-in can hold the LLM stream part-way until the test releases it: that proves, without any timing
threshold, that in bidi mode the first sentence's audio arrives while the LLM is still generating.

The tests that use the real endpoint are in the slow tier (their `server` / `transports` fixtures put them
there, see tests/conftest.py); the second half of this file gives the fast tier the same behaviours on fakes
(tests/fakes/: a scripted LLM, a tone transport, the real endpoint app with a tone engine), plus what only fakes
can make happen on demand: a stalled endpoint, a refused sentence, a paused embedded LLM.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.conftest import RunningServer
from tests.fakes.endpoint import InProcessEndpoint
from tests.fakes.llm import PausableLLM, Reply, ScriptedLLM
from tests.fakes.tts import ToneTransport, audio_seconds
from tests.pulse import PrivatePulse
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.audio.pcm import pcm16_to_float32
from voicecli.config import Config
from voicecli.converse.pipeline import (
    PipelineEvent,
    PipelineSettings,
    SentenceQueued,
    SentenceWords,
    TurnFailed,
    TurnFinished,
    VoicePipeline,
    WordSpoken,
)
from voicecli.converse.speculation import Speculation
from voicecli.converse.timeline import Mark
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import AudioChunk, AudioEvent, TTSTransport
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import SAMPLE_RATE

pytestmark = pytest.mark.usefixtures("dummy_aws_credentials")

ANSWER = ["The Moon orbits", " the Earth about once a month.", " It has no air", " and no liquid water.",
          " People first walked on it in 1969."]




class Recorder:
    """Collects pipeline events; releases the held LLM stream once the first audio byte has arrived."""

    def __init__(self, release: threading.Event | None = None) -> None:
        self.events: list[PipelineEvent] = []
        self.release = release

    def __call__(self, event: PipelineEvent) -> None:
        self.events.append(event)
        if isinstance(event, Mark) and event.name == "first_audio_byte" and self.release is not None:
            self.release.set()

    def marks(self) -> list[str]:
        return [e.name for e in self.events if isinstance(e, Mark)]



def make_pipeline(bedrock: BedrockStandIn, transports: dict[str, TTSTransport], recorder: Recorder,
                  mode: str = "bidi") -> tuple[VoicePipeline, CollectingSink]:
    llm = BedrockLLM(dataclasses.replace(Config.defaults().llm.bedrock, endpoint_url=bedrock.url))
    sink = CollectingSink()
    settings = PipelineSettings(mode=mode, first_fragment_words=0, min_sentence_chars=0)
    return VoicePipeline(llm, transports, sink, settings, Conversation(), recorder), sink


async def test_bidi_speaks_the_first_sentence_while_the_llm_is_still_generating(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    release = threading.Event()
    bedrock.queue(standin.Reply(deltas=ANSWER, hold_at=3, release=release, hold_timeout_s=120))
    recorder = Recorder(release)
    pipeline, sink = make_pipeline(bedrock, transports, recorder)
    timeline = await pipeline.turn("Tell me about the Moon.")

    # the stream was held until audio arrived, so audio came before the LLM finished
    assert release.is_set(), "\n".join(map(str, recorder.events))
    assert timeline.marks["first_audio_byte"] < timeline.marks["llm_done"]
    assert timeline.ordered() and not timeline.interrupted
    queued = [e.text for e in recorder.events if isinstance(e, SentenceQueued)]
    assert queued[0] == "The Moon orbits the Earth about once a month." and len(queued) == 3
    assert [s.done is not None for s in timeline.sentences] == [True, True, True]
    assert sink.audio().size / SAMPLE_RATE > 3.0
    assert [m.role for m in pipeline.history.all_messages()] == ["user", "assistant"]
    request = bedrock.requests[0].body
    assert request["messages"][0]["content"][0]["text"] == "Tell me about the Moon."


async def test_batch_waits_for_the_whole_answer(bedrock: BedrockStandIn, transports: dict[str, TTSTransport]) -> None:
    bedrock.queue(standin.Reply(deltas=ANSWER))
    recorder = Recorder()
    pipeline, sink = make_pipeline(bedrock, transports, recorder, mode="batch")
    timeline = await pipeline.turn("Tell me about the Moon.")
    assert timeline.marks["first_audio_byte"] > timeline.marks["llm_done"]
    queued = [e for e in recorder.events if isinstance(e, SentenceQueued)]
    assert len(queued) == 1 and queued[0].text.startswith("The Moon orbits the Earth") and "1969" in queued[0].text
    assert sink.audio().size / SAMPLE_RATE > 3.0


async def test_interrupt_keeps_what_was_spoken_and_the_connection(
    bedrock: BedrockStandIn, transports: dict[str, TTSTransport]
) -> None:
    never = threading.Event()
    bedrock.queue(standin.Reply(deltas=ANSWER, hold_at=3, release=never, hold_timeout_s=60),
                  standin.Reply(deltas=["Sure, here is a new answer."]))
    recorder = Recorder()

    def on_event(event: PipelineEvent) -> None:
        recorder(event)
        if isinstance(event, Mark) and event.name == "first_audio_byte" and event.turn_id == 1:
            interrupting.append(True)

    interrupting: list[bool] = []
    pipeline, _ = make_pipeline(bedrock, transports, recorder)
    pipeline._on_event = on_event
    import asyncio

    turn = asyncio.create_task(pipeline.turn("Tell me about the Moon."))
    while not interrupting:
        await asyncio.sleep(0.01)
    await pipeline.interrupt()
    timeline = await turn
    never.set()
    assert timeline.interrupted
    finished = [e for e in recorder.events if isinstance(e, TurnFinished)]
    # Interrupted at the first audio byte: the turn's first piece comes in parts, and its word times with the first
    # part, so what was heard is the words begun in the audio written by then, a prefix of the first sentence
    # (before those times came early, the whole sentence was counted).
    spoken = finished[-1].spoken
    assert finished[-1].interrupted and spoken and "The Moon orbits the Earth about once a month.".startswith(spoken)
    assert pipeline.history.all_messages()[-1].content.endswith("…")
    second = await pipeline.turn("Something else?")  # same connection, next turn works
    assert not second.interrupted and "first_audio_byte" in second.marks
    assert isinstance(transports["bidi"], WebSocketTransport) and transports["bidi"].reconnects == 0


async def test_llm_failure_mid_stream_is_reported(bedrock: BedrockStandIn,
                                                  transports: dict[str, TTSTransport]) -> None:
    bedrock.queue(standin.throttled_mid_stream(after=2))
    recorder = Recorder()
    pipeline, _ = make_pipeline(bedrock, transports, recorder)
    await pipeline.turn("Hello?")
    failed = [e for e in recorder.events if isinstance(e, TurnFailed)]
    assert failed and "throttl" in failed[0].message.lower()


class OddCutWebSocket(WebSocketTransport):
    """The real WebSocket transport whose audio reaches the pipeline cut at odd byte offsets: what a network that
    knows nothing of samples (SageMaker's response stream, chunked HTTP) may do to a pcm16 stream."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.original = bytearray()

    def _emit(self, event: AudioEvent) -> None:
        if not isinstance(event, AudioChunk):
            super()._emit(event)
            return
        self.original += event.data
        at = 0
        for size in itertools.cycle((3, 5, 1, 7)):
            if at >= len(event.data):
                break
            super()._emit(dataclasses.replace(event, data=event.data[at : at + size]))
            at += size


async def test_pcm16_cut_at_odd_offsets_plays_every_sample(bedrock: BedrockStandIn, server: RunningServer) -> None:
    bedrock.queue(standin.Reply(deltas=["The Moon orbits the Earth."]))
    transport = OddCutWebSocket(server.http_url)
    await transport.connect()
    recorder = Recorder()
    sink = CollectingSink()
    settings = PipelineSettings(mode="bidi", first_fragment_words=0, min_sentence_chars=0, audio_format="pcm16")
    llm = BedrockLLM(dataclasses.replace(Config.defaults().llm.bedrock, endpoint_url=bedrock.url))
    pipeline = VoicePipeline(llm, {"bidi": transport}, sink, settings, Conversation(), recorder)
    try:
        await pipeline.turn("Tell me about the Moon.")
    finally:
        await transport.aclose()
    assert not [e for e in recorder.events if isinstance(e, TurnFailed)], recorder.events
    assert len(transport.original) > SAMPLE_RATE and len(transport.original) % 2 == 0
    assert np.array_equal(sink.audio(), pcm16_to_float32(bytes(transport.original)))


# ------------------------------------------------------------------------------------------------- fast tier
# The behaviours above on fakes: a scripted LLM, the tone transport (real MP3 frames, decoded for real) and a
# collecting sink; then the real WebSocket transport against the real endpoint app with the tone engine.


class FakeTurns:
    """A pipeline over the fakes, with the events it sent. `async with` connects its transport and closes it."""

    def __init__(self, *replies: Reply, mode: str = "bidi", llm: ScriptedLLM | None = None,
                 transport: TTSTransport | None = None, **settings: Any) -> None:
        self.events: list[PipelineEvent] = []
        self.llm = llm or ScriptedLLM()
        self.llm.queue(*replies)
        self.transport = transport or ToneTransport()
        self.sink = CollectingSink()
        self.settings = PipelineSettings(mode=mode, first_fragment_words=0, min_sentence_chars=0, **settings)
        self.pipeline = VoicePipeline(self.llm, {mode: self.transport}, self.sink, self.settings, Conversation(),
                                      self.on_event)
        self.first_byte = asyncio.Event()
        """Set at each `first_audio_byte` mark (clear it before the next turn): an answer is being heard."""

    async def __aenter__(self) -> FakeTurns:
        await self.transport.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.transport.aclose()

    @property
    def tones(self) -> ToneTransport:
        assert isinstance(self.transport, ToneTransport)
        return self.transport

    def on_event(self, event: PipelineEvent) -> None:
        self.events.append(event)
        if isinstance(event, Mark) and event.name == "first_audio_byte":
            self.first_byte.set()

    def of[E](self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    def heard_s(self) -> float:
        return self.sink.audio().size / SAMPLE_RATE

    async def llm_closed(self, call: int) -> bool:
        """Whether stream call number `call` was closed early, once the cancelled LLM task had time to clean up."""
        for _ in range(200):
            if self.llm.calls[call].closed_early:
                return True
            await asyncio.sleep(0.005)
        return False


def tone_s(*texts: str) -> float:
    """Seconds of audio the tone transport answers these sentences with."""
    return sum(audio_seconds(text) for text in texts)


async def test_fake_bidi_speaks_the_first_sentence_while_the_llm_is_still_generating() -> None:
    release = asyncio.Event()
    async with FakeTurns(Reply(ANSWER, hold_at=3, release=release)) as turns:
        task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon."))
        await asyncio.wait_for(turns.first_byte.wait(), 10)
        # The first sentence is being heard while the LLM waits, mid-answer, for this very release.
        assert turns.llm.calls[0].held and turns.llm.calls[0].yielded == 3
        release.set()
        timeline = await asyncio.wait_for(task, 10)

    assert timeline.marks["first_audio_byte"] < timeline.marks["llm_done"]
    assert timeline.ordered() and not timeline.interrupted
    queued = [e.text for e in turns.of(SentenceQueued)]
    assert queued == ["The Moon orbits the Earth about once a month.", "It has no air and no liquid water.",
                      "People first walked on it in 1969."]
    assert turns.tones.texts == queued  # one request per sentence, in order, on the one transport
    assert [s.done is not None for s in timeline.sentences] == [True, True, True]
    assert turns.heard_s() == pytest.approx(tone_s(*queued), abs=0.1)  # every sentence decoded and written whole
    assert [m.role for m in turns.pipeline.history.all_messages()] == ["user", "assistant"]
    assert turns.llm.calls[0].messages[0].content == "Tell me about the Moon." and turns.llm.calls[0].ended
    finished = turns.of(TurnFinished)
    assert len(finished) == 1 and finished[0].answer == "".join(ANSWER) and not turns.of(TurnFailed)


async def test_fake_the_conversation_given_bounds_the_context() -> None:
    """The history the session builds from config (llm.history_turns; the local model: at most 2) is the one the
    LLM's context comes from: with no exchanges kept, the second question is asked alone. (An empty conversation
    is falsy: it was once swapped for a default one keeping 8.)"""
    async with FakeTurns(Reply(["Paris."]), Reply(["Madrid."])) as turns:
        bounded = Conversation(max_turns=0)
        turns.pipeline = VoicePipeline(turns.llm, {"bidi": turns.transport}, turns.sink, turns.settings, bounded,
                                       turns.on_event)
        assert turns.pipeline.history is bounded
        await asyncio.wait_for(turns.pipeline.turn("What is the capital of France?"), 10)
        await asyncio.wait_for(turns.pipeline.turn("And of Spain?"), 10)
    assert [m.content for m in turns.llm.calls[1].messages] == ["And of Spain?"]


async def test_fake_batch_waits_for_the_whole_answer() -> None:
    async with FakeTurns(Reply(ANSWER), mode="batch") as turns:
        timeline = await asyncio.wait_for(turns.pipeline.turn("Tell me about the Moon."), 10)
    assert timeline.marks["first_audio_byte"] > timeline.marks["llm_done"]
    queued = turns.of(SentenceQueued)
    assert len(queued) == 1 and queued[0].text.startswith("The Moon orbits the Earth") and "1969" in queued[0].text
    assert turns.heard_s() == pytest.approx(tone_s(queued[0].text), abs=0.1)


async def test_fake_interrupt_keeps_what_was_spoken_and_the_connection() -> None:
    never = asyncio.Event()
    async with FakeTurns(Reply(ANSWER, hold_at=3, release=never), Reply(["Sure, here is a new answer."])) as turns:
        task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon."))
        await asyncio.wait_for(turns.first_byte.wait(), 10)
        assert turns.pipeline.speaking
        await turns.pipeline.interrupt()
        timeline = await asyncio.wait_for(task, 10)

        assert timeline.interrupted and not turns.pipeline.speaking
        finished = turns.of(TurnFinished)
        assert finished[-1].interrupted and finished[-1].spoken == "The Moon orbits the Earth about once a month."
        assert turns.pipeline.history.all_messages()[-1].content.endswith("…")
        assert await turns.llm_closed(0)  # the generation was stopped, not left to run
        assert turns.tones.cancels == [None]  # every pending synthesis dropped, on the same transport
        second = await asyncio.wait_for(turns.pipeline.turn("Something else?"), 10)
    assert not second.interrupted and "first_audio_byte" in second.marks
    assert turns.tones.connects == 1 and turns.llm.unused == 0
    assert [m.role for m in turns.pipeline.history.all_messages()] == ["user", "assistant", "user", "assistant"]


async def test_fake_cancelling_the_turn_itself_stops_the_llm_and_propagates() -> None:
    """The caller's own cancel (the app closing) is not a barge-in: it goes on up, and the LLM stream is closed."""
    never = asyncio.Event()
    async with FakeTurns(Reply(ANSWER, hold_at=3, release=never)) as turns:
        task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon."))
        await asyncio.wait_for(turns.first_byte.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await turns.llm_closed(0) and not turns.pipeline.speaking


async def test_fake_llm_failure_mid_stream_is_reported() -> None:
    async with FakeTurns(Reply(["Hello", " there, how"], fail_at=2)) as turns:
        await asyncio.wait_for(turns.pipeline.turn("Hello?"), 10)
    failed = turns.of(TurnFailed)
    assert failed and "throttl" in failed[0].message.lower()
    assert [m.role for m in turns.pipeline.history.all_messages()] == ["user"]  # no half answer remembered


async def test_fake_a_refused_sentence_fails_the_turn_and_says_which() -> None:
    refusing = ToneTransport(failures={"forbidden": "text_too_long"})
    async with FakeTurns(Reply(["This one is fine.", " This one is forbidden."]), transport=refusing) as turns:
        timeline = await asyncio.wait_for(turns.pipeline.turn("Go on."), 10)
    [failed] = turns.of(TurnFailed)
    assert "sentence 2 could not be spoken" in failed.message and "text_too_long" in failed.message
    assert timeline.sentences[0].done is not None and turns.heard_s() > 0  # the first sentence was still heard


async def test_fake_a_silent_endpoint_fails_the_turn_with_advice_instead_of_hanging() -> None:
    async with FakeTurns(Reply(["The Moon orbits the Earth."]), stall_timeout_s=0.2) as turns:
        turns.tones.gate.clear()  # the endpoint accepts the request and then says nothing
        await asyncio.wait_for(turns.pipeline.turn("Hello?"), 10)
        [failed] = turns.of(TurnFailed)
        assert "sent nothing" in failed.message and "voicecli doctor" in failed.message
        assert turns.tones.cancels == [None] and turns.heard_s() == 0
        turns.tones.gate.set()
        turns.llm.queue(Reply(["Back again."]))
        second = await asyncio.wait_for(turns.pipeline.turn("Again?"), 10)  # the dropped request stays dropped
    assert "first_audio_byte" in second.marks and turns.heard_s() == pytest.approx(tone_s("Back again."), abs=0.1)


async def test_fake_an_embedded_llm_is_paused_until_the_first_sentence_is_synthesized() -> None:
    llm = PausableLLM()
    async with FakeTurns(Reply(ANSWER), llm=llm) as turns:
        turns.tones.gate.clear()
        task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon."))
        while not turns.tones.sent:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)
        # The first sentence is out, its audio not in yet: the LLM waits, so a local TTS would have every core.
        assert llm.paused and llm.calls[0].yielded == 3 and llm.pauses == ["pause"]
        turns.tones.gate.set()
        await asyncio.wait_for(task, 10)
    assert llm.pauses == ["pause", "resume"] and llm.calls[0].ended and len(turns.tones.sent) == 3


async def test_fake_an_embedded_llm_reads_the_next_context_ahead_after_each_turn() -> None:
    """LocalLLM.prefill: once a turn is in the history, the LLM is handed the context the next question will
    follow (with the system prompt), so its next first token waits for little more than the question."""
    llm = PausableLLM(Reply(["Paris."]), Reply(["Rome."]))
    async with FakeTurns(llm=llm) as turns:
        await asyncio.wait_for(turns.pipeline.turn("What is the capital of France?"), 10)
        for _ in range(100):
            if llm.prefills:
                break
            await asyncio.sleep(0.01)
        assert llm.prefills == [(["What is the capital of France?", "Paris."], turns.settings.system_prompt)]
        await asyncio.wait_for(turns.pipeline.turn("And of Italy?"), 10)
    assert llm.prefills[-1][0] == ["What is the capital of France?", "Paris.", "And of Italy?", "Rome."]


class OddCutTones(ToneTransport):
    """The tone transport whose audio reaches the pipeline cut at odd byte offsets (as OddCutWebSocket above)."""

    def __init__(self) -> None:
        super().__init__()
        self.original = bytearray()

    def _emit(self, event: AudioEvent) -> None:
        if not isinstance(event, AudioChunk):
            super()._emit(event)
            return
        self.original += event.data
        at = 0
        for size in itertools.cycle((3, 5, 1, 7)):
            if at >= len(event.data):
                break
            super()._emit(dataclasses.replace(event, data=event.data[at : at + size]))
            at += size


async def test_fake_pcm16_cut_at_odd_offsets_plays_every_sample() -> None:
    cutting = OddCutTones()
    async with FakeTurns(Reply(["The Moon orbits the Earth."]), transport=cutting, audio_format="pcm16") as turns:
        await asyncio.wait_for(turns.pipeline.turn("Tell me about the Moon."), 10)
    assert not turns.of(TurnFailed), turns.events
    assert cutting.sent[0].format == "pcm16" and len(cutting.original) % 2 == 0 and cutting.original
    assert np.array_equal(turns.sink.audio(), pcm16_to_float32(bytes(cutting.original)))


async def test_fake_endpoint_turns_and_a_barge_in_over_the_real_websocket(fake_endpoint: InProcessEndpoint) -> None:
    """The output half for real but the LLM and the engine: sentences over the real WebSocket transport to the real
    endpoint app, its MP3 decoded into the sink; a barge-in mid-answer cancels on the same connection."""
    never = asyncio.Event()
    replies = [Reply(ANSWER), Reply(ANSWER, hold_at=3, release=never), Reply(["Fine, something else."])]
    async with FakeTurns(*replies, transport=WebSocketTransport(fake_endpoint.http_url)) as turns:
        first = await asyncio.wait_for(turns.pipeline.turn("Tell me about the Moon."), 30)
        assert first.ordered() and not first.interrupted and not turns.of(TurnFailed)
        assert [s.done is not None for s in first.sentences] == [True, True, True]
        assert turns.heard_s() > 1.0

        turns.first_byte.clear()
        task = asyncio.create_task(turns.pipeline.turn("And again?"))
        await asyncio.wait_for(turns.first_byte.wait(), 30)
        await turns.pipeline.interrupt()
        interrupted = await asyncio.wait_for(task, 30)
        assert interrupted.interrupted and await turns.llm_closed(1)
        third = await asyncio.wait_for(turns.pipeline.turn("Something else?"), 30)
        assert not third.interrupted and "first_audio_byte" in third.marks and not turns.of(TurnFailed)
        assert isinstance(turns.transport, WebSocketTransport) and turns.transport.reconnects == 0


# --- what was heard of an interrupted answer (converse/heard.py): the history keeps the words played ------------

BARGED = ["The Moon orbits the Earth about once a month.", " It has no air and no liquid water.", " People first"]


class PositionSink(CollectingSink):
    """A collecting sink whose play position the test sets: where a listener is in the answer at a barge-in."""

    def __init__(self) -> None:
        super().__init__()
        self.position_s = 0.0

    def played_s(self, answer_id: str) -> float | None:
        return self.position_s


async def barge_in_at(turns: FakeTurns, position: Callable[[FakeTurns], float]) -> TurnFinished:
    """Speak BARGED's two sentences, set the sink's play position from what arrived, barge in there."""
    sink = PositionSink()
    turns.sink = turns.pipeline.sink = sink
    task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon."))
    for _ in range(2000):  # both sentences' audio arrived and was decoded (the pipeline's own marks say so)
        current = turns.pipeline._current
        if current is not None and [s.done is not None for s in current.sentences] == [True, True]:
            break
        await asyncio.sleep(0.005)
    sink.position_s = position(turns)
    if turns.of(SentenceWords):  # the caption catches up with the position before the barge-in
        for _ in range(400):
            if any(e.index == 1 for e in turns.of(WordSpoken)):
                break
            await asyncio.sleep(0.005)
    await turns.pipeline.interrupt()
    await asyncio.wait_for(task, 10)
    finished = turns.of(TurnFinished)
    assert len(finished) == 1 and finished[0].interrupted and finished[0].cut is not None
    return finished[0]


async def test_fake_a_barge_in_keeps_in_the_history_the_words_played() -> None:
    never = asyncio.Event()
    async with FakeTurns(Reply(BARGED, hold_at=3, release=never), transport=ToneTransport(words=True)) as turns:
        first_s = tone_s(BARGED[0])

        def inside_the_fifth_word(turns: FakeTurns) -> float:
            words = [e for e in turns.of(SentenceWords) if e.index == 1][-1].words
            assert [w.w for w in words][4] == "and"
            return first_s + (words[4].start_ms + words[4].end_ms) / 2000

        finished = await barge_in_at(turns, inside_the_fifth_word)
    assert all(request.word_timings for request in turns.tones.sent)
    heard = "The Moon orbits the Earth about once a month. It has no air and"
    assert finished.spoken == heard
    assert pipeline_history(turns)[-1] == heard + "…"
    cut = finished.cut
    assert cut is not None and cut.sentence == 1 and cut.words is not None and cut.words.by == "timings"
    assert cut.words_played == 9 + 5 and cut.played_s == pytest.approx(turns.sink.played_s("") or 0.0)
    spoken = [(e.index, e.word) for e in turns.of(WordSpoken)]
    assert spoken and spoken == sorted(spoken)  # the caption moved forward only


async def test_fake_without_word_times_a_barge_in_keeps_the_played_fraction() -> None:
    never = asyncio.Event()
    async with FakeTurns(Reply(BARGED, hold_at=3, release=never)) as turns:
        first_s, second_s = tone_s(BARGED[0]), tone_s(BARGED[1].strip())
        finished = await barge_in_at(turns, lambda turns: first_s + second_s / 2)
    # Half of "It has no air and no liquid water." (34 characters) is inside "and": the words begun by then.
    assert finished.spoken == "The Moon orbits the Earth about once a month. It has no air and"
    assert finished.cut is not None and finished.cut.words is not None and finished.cut.words.by == "fraction"
    assert not turns.of(SentenceWords) and not turns.of(WordSpoken)


async def test_fake_a_barge_in_before_any_sound_keeps_nothing_of_the_answer() -> None:
    never = asyncio.Event()
    async with FakeTurns(Reply(BARGED, hold_at=3, release=never), transport=ToneTransport(words=True)) as turns:
        finished = await barge_in_at(turns, lambda turns: 0.0)
    assert finished.spoken == "" and finished.cut is not None and finished.cut.sentence is None
    assert pipeline_history(turns) == ["Tell me about the Moon."]


def pipeline_history(turns: FakeTurns) -> list[str]:
    return [message.content for message in turns.pipeline.history.all_messages()]


@pytest.mark.slow
async def test_a_barge_in_on_the_speaker_keeps_the_words_the_speaker_played(
        server: RunningServer, pulse: PrivatePulse) -> None:
    """Real endpoint (Kokoro ONNX), real MP3 decode, the speaker on the private PulseAudio: a barge-in mid-answer
    keeps in the history the words that were played. What was played is taken from the recording of the virtual
    speaker, not from the pipeline: the words begun by the end of the recorded sound must be the history's, to
    within one word."""
    from voicecli.playback.player import Player
    from voicecli.playback.speaker import Speaker

    answer = ["The Moon orbits the Earth about once a month.", " It has no air and no liquid water at all.",
              " People first walked on it in nineteen sixty nine."]
    async with FakeTurns(Reply(answer), transport=WebSocketTransport(server.http_url)) as turns:
        recorder = pulse.record(rate=48_000)
        await asyncio.sleep(0.3)  # parec's first buffers
        speaker = Speaker(Player())
        turns.sink = turns.pipeline.sink = speaker  # type: ignore[assignment]
        try:
            # Held (a speculative turn) until all its audio is in, so that it then plays without a gap: two cores
            # synthesize slower than real time, and the recording's length must be the audio's.
            guess: Speculation[PipelineEvent] = Speculation("Tell me about the Moon.", 1)
            task = asyncio.create_task(turns.pipeline.turn("Tell me about the Moon.", speculation=guess))
            for _ in range(6000):
                current = turns.pipeline._current
                if current is not None and current.llm_finished.is_set() and current.sentences and all(
                        sentence.done is not None for sentence in current.sentences):
                    break
                await asyncio.sleep(0.01)
            guess.confirm()
            await asyncio.sleep(3.2)  # into the second sentence
            await turns.pipeline.interrupt()
            await asyncio.wait_for(task, 30)
            await asyncio.sleep(0.3)
        finally:
            speaker.close()
        captured = recorder.stop()
    finished = turns.of(TurnFinished)[-1]
    cut = finished.cut
    assert finished.interrupted and cut is not None and cut.sentence is not None and cut.words is not None
    loud = np.flatnonzero(np.abs(captured) > 1e-3)
    recorded_s = (loud[-1] - loud[0] + 1) / 48_000
    words = [e for e in turns.of(SentenceWords) if e.index == cut.sentence][-1].words
    into_ms = (recorded_s - (cut.played_s - cut.sentence_played_s)) * 1000
    recorded_count = sum(1 for word in words if word.start_ms < into_ms)
    print(f"MEASURE barge_in position {cut.played_s:.3f} s, recorded {recorded_s:.3f} s; words kept "
          f"{cut.words.count}, begun in the recording {recorded_count}; spoken {finished.spoken!r}")
    assert cut.words.by == "timings" and abs(cut.words.count - recorded_count) <= 1
    said = [text.strip() for text in answer]
    assert finished.spoken == " ".join([*said[: cut.sentence], *said[cut.sentence].split()[: cut.words.count]])
    assert turns.pipeline.history.all_messages()[-1].content == finished.spoken + "…"
