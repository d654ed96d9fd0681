"""The conversation pipeline end to end with the real endpoint, and the real boto3 Bedrock client on a stand-in.

The stand-in can hold the LLM stream part-way until the test releases it: that proves, without any timing
threshold, that in bidi mode the first sentence's audio arrives while the LLM is still generating.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

import numpy as np
import pytest

from tests.conftest import RunningServer
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.audio.pcm import pcm16_to_float32
from voicecli.config import Config
from voicecli.converse.pipeline import (
    PipelineEvent,
    PipelineSettings,
    SentenceQueued,
    TurnFailed,
    TurnFinished,
    VoicePipeline,
)
from voicecli.converse.timeline import Mark
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import AudioChunk, AudioEvent, TTSTransport
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import SAMPLE_RATE

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dummy_aws_credentials")]

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
    assert finished[-1].interrupted and finished[-1].spoken.startswith("The Moon orbits")
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
