"""Faults injected into a real conversation turn; each test states EXACTLY what was sent, synthesized and heard.

The pipeline runs as in the chat: the real boto3 Bedrock client on the stand-in, the real endpoint over the
WebSocket transport, MP3 decoding, a CollectingSink instead of the speaker (the speaker fault has its own test on
a private PulseAudio). `Tee` passes the transport's events through unchanged and keeps each sentence's audio
bytes, so a faulty turn is compared, sentence by sentence and byte for byte, with a clean turn of the same text.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import threading
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RunningServer, _free_port
from tests.endpoint_process import EndpointProcess
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from tests.standins.tcp_proxy import CuttableProxy
from voicecli.config import Config
from voicecli.converse.pipeline import (
    PipelineEvent,
    PipelineSettings,
    SentenceAudio,
    TurnFailed,
    TurnFinished,
    VoicePipeline,
)
from voicecli.converse.timeline import Mark, TurnTimeline
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import AudioChunk, AudioEvent, AudioStart, SpeechRequest, TTSTransport
from voicecli.tts.websocket import WebSocketTransport

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dummy_aws_credentials")]

ANSWER = ["The Moon orbits", " the Earth about once a month.", " It has no air", " and no liquid water.",
          " People first walked on it in 1969."]
SENTENCES = ["The Moon orbits the Earth about once a month.", "It has no air and no liquid water.",
             "People first walked on it in 1969."]




class Tee(TTSTransport):
    """A transport that forwards everything to `inner` and records the events it hands to the pipeline."""

    name = "tee"
    persistent = True

    def __init__(self, inner: TTSTransport) -> None:
        super().__init__()
        self.inner = inner
        self.seen: list[AudioEvent] = []

    async def connect(self) -> None:
        await self.inner.connect()

    async def send(self, request: SpeechRequest) -> None:
        await self.inner.send(request)

    async def cancel(self, request_id: str | None = None) -> None:
        await self.inner.cancel(request_id)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def next_event(self, timeout: float | None = None) -> AudioEvent:
        event = await self.inner.next_event(timeout)
        self.seen.append(event)
        return event

    def audio_by_sentence(self) -> list[bytes]:
        """Each request's audio bytes, in the order the requests started (one entry per request id)."""
        parts: dict[str, bytearray] = {}
        for event in self.seen:
            if isinstance(event, AudioStart):
                parts.setdefault(event.request_id, bytearray())
            elif isinstance(event, AudioChunk):
                parts.setdefault(event.request_id, bytearray()).extend(event.data)
        return [bytes(v) for v in parts.values()]

    def starts(self) -> Counter[str]:
        return Counter(e.request_id for e in self.seen if isinstance(e, AudioStart))


@dataclass
class Turn:
    """One turn's outcome, for the accounting assertions."""

    timeline: TurnTimeline
    events: list[PipelineEvent]
    tee: Tee
    sink: CollectingSink
    heard: Counter[int] = field(default_factory=Counter)

    @property
    def failures(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, TurnFailed)]

    @property
    def finished(self) -> TurnFinished:
        return [e for e in self.events if isinstance(e, TurnFinished)][-1]

    @property
    def sent(self) -> list[str]:
        return [s.text for s in self.timeline.sentences if s.sent is not None]

    @property
    def synthesized(self) -> list[str]:
        return [s.text for s in self.timeline.sentences if s.done is not None]


class Harness:
    """A pipeline on the Bedrock stand-in and a WebSocket transport, recording everything about each turn."""

    def __init__(self, bedrock: BedrockStandIn, transport: TTSTransport, stall_timeout_s: float = 120.0) -> None:
        self.tee = Tee(transport)
        self.sink = CollectingSink()
        self.events: list[PipelineEvent] = []
        self.on_mark: dict[str, list[object]] = {}
        llm = BedrockLLM(dataclasses.replace(Config.defaults().llm.bedrock, endpoint_url=bedrock.url))
        settings = PipelineSettings(first_fragment_words=0, min_sentence_chars=0, stall_timeout_s=stall_timeout_s)
        self.pipeline = VoicePipeline(llm, {"bidi": self.tee}, self.sink, settings, Conversation(), self.events.append)
        self.first_audio: asyncio.Event | None = None

    async def turn(self, text: str = "Tell me about the Moon.", timeout_s: float = 300.0) -> Turn:
        start = len(self.events)
        self.tee.seen.clear()
        self.sink.chunks.clear()
        timeline = await asyncio.wait_for(self.pipeline.turn(text), timeout_s)
        events = self.events[start:]
        heard = Counter(e.index for e in events if isinstance(e, SentenceAudio))
        return Turn(timeline, events, self.tee, self.sink, heard)


def when_first_audio(harness: Harness, action: object) -> None:
    """Run `action()` (synchronously, inside the event callback) the moment the first audio byte arrives."""
    done = threading.Event()
    record = harness.pipeline._on_event

    def on_event(event: PipelineEvent) -> None:
        record(event)
        if isinstance(event, Mark) and event.name == "first_audio_byte" and not done.is_set():
            done.set()
            action()  # type: ignore[operator]

    harness.pipeline._on_event = on_event


def assert_every_sentence_exactly_once(turn: Turn, clean: Turn) -> None:
    assert turn.failures == [], turn.failures
    assert turn.sent == turn.synthesized == SENTENCES
    assert turn.heard == Counter({0: 1, 1: 1, 2: 1})  # each sentence started playing once
    assert all(count == 1 for count in turn.tee.starts().values()) and len(turn.tee.starts()) == 3
    assert turn.tee.audio_by_sentence() == clean.tee.audio_by_sentence()  # byte for byte, per sentence
    assert np.array_equal(turn.sink.audio(), clean.sink.audio())  # and what reached the speaker


@pytest.fixture
async def shared_transport(server: RunningServer) -> AsyncIterator[WebSocketTransport]:
    transport = WebSocketTransport(server.http_url)
    await transport.connect()
    yield transport
    await transport.aclose()


# ---------------------------------------------------------------------------------------------------- endpoint


async def test_endpoint_killed_and_restarted_mid_turn_loses_and_repeats_nothing(
    bedrock: BedrockStandIn, models_dir: Path, tmp_path: Path
) -> None:
    endpoint = EndpointProcess(_free_port(), models_dir, tmp_path / "server.log").start()
    restarted = threading.Thread(target=lambda: endpoint.start(wait=False), name="restart")
    try:
        # ~0.1 s doubling, 11 tries: keeps trying for ~200 s, longer than a restart + model load on 2 busy cores
        transport = WebSocketTransport(endpoint.http_url, reconnect_attempts=11, reconnect_base_delay_s=0.1)
        await transport.connect()
        harness = Harness(bedrock, transport, stall_timeout_s=300.0)
        bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=ANSWER))
        clean = await harness.turn()
        assert clean.failures == [] and clean.synthesized == SENTENCES

        def kill_and_restart() -> None:
            assert endpoint.process is not None
            os.kill(endpoint.process.pid, signal.SIGKILL)
            endpoint.process.wait(timeout=15)
            restarted.start()

        when_first_audio(harness, kill_and_restart)
        faulty = await harness.turn(timeout_s=600.0)
        restarted.join(timeout=60)
        assert endpoint.starts == 2 and endpoint.alive()
        assert transport.reconnects == 1
        assert_every_sentence_exactly_once(faulty, clean)
        await transport.aclose()
    finally:
        if restarted.is_alive():
            restarted.join(timeout=300)
        endpoint.stop()


async def test_connection_dropped_mid_audio_loses_and_repeats_nothing(
    bedrock: BedrockStandIn, server: RunningServer
) -> None:
    proxy = await CuttableProxy(server.port).start()
    transport = WebSocketTransport(proxy.url)
    await transport.connect()
    try:
        harness = Harness(bedrock, transport)
        bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=ANSWER))
        clean = await harness.turn()
        when_first_audio(harness, proxy.cut)
        faulty = await harness.turn()
        assert transport.reconnects == 1 and proxy.connections == 2
        assert_every_sentence_exactly_once(faulty, clean)
    finally:
        await transport.aclose()
        await proxy.stop()


async def test_stalled_endpoint_fails_the_turn_with_advice_instead_of_hanging(
    bedrock: BedrockStandIn, server: RunningServer
) -> None:
    proxy = await CuttableProxy(server.port).start()
    transport = WebSocketTransport(proxy.url)
    await transport.connect()
    try:
        harness = Harness(bedrock, transport, stall_timeout_s=2.0)
        bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=["All good again."]))
        when_first_audio(harness, proxy.stall)
        stalled = await harness.turn()
        assert stalled.sent == SENTENCES  # all three went out before (or while) the endpoint stalled
        assert len(stalled.failures) == 1
        assert "sent nothing for 2 s" in stalled.failures[0] and "voicecli doctor" in stalled.failures[0]
        assert stalled.synthesized != SENTENCES  # the stall hit before the last sentence completed
        assert all(count == 1 for count in stalled.heard.values())  # nothing heard twice
        assert [m.role for m in harness.pipeline.history.all_messages()] == ["user"]  # failed answer not kept
    finally:
        proxy.resume()
        await transport.aclose()
        await proxy.stop()


# ---------------------------------------------------------------------------------------------------- the LLM


@pytest.mark.parametrize("drop", [False, True], ids=["throttled", "dropped"])
async def test_llm_failing_mid_stream_speaks_what_was_sent_once_and_the_session_goes_on(
    bedrock: BedrockStandIn, shared_transport: WebSocketTransport, drop: bool
) -> None:
    reply = standin.Reply(deltas=ANSWER, fail_after=3, drop=drop)  # a throttlingException event, or a cut
    harness = Harness(bedrock, shared_transport)
    bedrock.queue(reply, standin.Reply(deltas=ANSWER))
    broken = await harness.turn()
    # three deltas arrived: the first sentence was complete (the third delta began the next one) and was sent
    assert broken.sent == broken.synthesized == SENTENCES[:1]
    assert broken.heard == Counter({0: 1}) and broken.tee.starts() == Counter({"turn-1-0": 1})
    assert broken.sink.audio().size > 0
    assert len(broken.failures) == 1
    message = broken.failures[0].lower()
    assert "bedrock" in message and ("retry" in message or "wait" in message), broken.failures[0]
    if reply.drop is False:
        assert "throttl" in message

    after = await harness.turn()  # same pipeline, same connection: the next turn works
    assert after.failures == [] and after.synthesized == SENTENCES
    assert after.heard == Counter({0: 1, 1: 1, 2: 1})
    assert shared_transport.reconnects == 0


# ---------------------------------------------------------------------------------------------------- the speaker


def _pulse_pid(pulse: object) -> int:
    runtime: Path = pulse.runtime  # type: ignore[attr-defined]
    return int((runtime / "pulse" / "pid").read_text().strip())


async def test_audio_device_unplugged_mid_answer_is_a_clear_error_not_a_hang(
    bedrock: BedrockStandIn, shared_transport: WebSocketTransport, own_pulse: object
) -> None:
    from voicecli.playback.player import OutputStreamError, Player
    from voicecli.playback.speaker import Speaker

    speaker = Speaker(Player())
    harness = Harness(bedrock, shared_transport)
    harness.pipeline.sink = speaker
    bedrock.queue(standin.Reply(deltas=ANSWER), standin.Reply(deltas=ANSWER))
    when_first_audio(harness, lambda: os.kill(_pulse_pid(own_pulse), signal.SIGKILL))
    try:
        turn = await harness.turn(timeout_s=120)  # the time limit IS the assertion that it does not hang
        (message,) = turn.failures  # reported as the turn's failure, not raised out of the pipeline
        assert "went away" in message and "voicecli doctor" in message
        with pytest.raises(OutputStreamError):
            speaker.write(np.zeros(480, np.float32), "after")  # the sink itself stays honest about it
    finally:
        with contextlib.suppress(Exception):
            speaker.close()
