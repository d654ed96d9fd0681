"""The batch transport (POST /invocations per request) against the real endpoint, and against a hostile one
(tests/tts/hostile.py) for its limit and its request body."""

from __future__ import annotations

import json

import miniaudio
import pytest

from tests.conftest import RunningServer
from tests.tts.events import collect
from tests.tts.hostile import HostileHttp
from voicecli.audio.mp3_frames import frame_length
from voicecli.tts.base import (
    AUDIO_TOO_LONG,
    MAX_REQUEST_AUDIO_S,
    AudioChunk,
    AudioDone,
    AudioFailed,
    AudioStart,
    SpeechRequest,
    TransportError,
    audio_seconds,
)
from voicecli.tts.http_batch import BatchHttpTransport, http_base
from voicecli.wire.protocol import InvocationRequest, Timings


def test_http_base_accepts_websocket_urls() -> None:
    assert http_base("ws://h:1/invocations-bidirectional-stream") == "http://h:1"
    assert http_base("https://h/") == "https://h"


@pytest.mark.slow
async def test_whole_answer_arrives_as_frame_aligned_slices(server: RunningServer) -> None:
    transport = BatchHttpTransport(server.ws_url)
    await transport.connect()
    try:
        text = "Batch mode sends the whole answer at once. Nothing is heard until all of it is synthesized."
        await transport.send(SpeechRequest("whole", text))
        start = await transport.next_event(120)
        assert isinstance(start, AudioStart)
        chunks: list[bytes] = []
        while not isinstance(event := await transport.next_event(120), AudioDone):
            assert isinstance(event, AudioChunk)
            chunks.append(event.data)
        assert all(chunk[:1] == b"\xff" for chunk in chunks)
        for chunk in chunks:  # each slice is whole frames
            position = 0
            while position < len(chunk):
                position += frame_length(chunk[position : position + 4])
            assert position == len(chunk)
        decoded = miniaudio.decode(b"".join(chunks), miniaudio.SampleFormat.FLOAT32, nchannels=1, sample_rate=24000)
        assert decoded.duration > 2.0
        assert event.timings is not None and event.timings.audio_s > 2.0
    finally:
        await transport.aclose()


@pytest.mark.slow
async def test_bad_request_is_a_failed_event(server: RunningServer) -> None:
    transport = BatchHttpTransport(server.http_url)
    await transport.connect()
    try:
        await transport.send(SpeechRequest("v", "Hello.", voice="nobody"))
        event = await transport.next_event(60)
        assert isinstance(event, AudioFailed) and event.code == "unknown_voice"
    finally:
        await transport.aclose()


async def test_unreachable_endpoint() -> None:
    with pytest.raises(TransportError, match="voicecli serve"):
        await BatchHttpTransport("http://127.0.0.1:9").connect()


async def test_an_answer_past_the_limit_fails_that_request_and_the_next_one_is_served() -> None:
    """A huge or endless body used to be read whole, however large."""
    with HostileHttp(2 * MAX_REQUEST_AUDIO_S) as endpoint:
        async with BatchHttpTransport(endpoint.url) as transport:
            await transport.send(SpeechRequest("endless", "Hello."))
            await transport.send(SpeechRequest("next", "Hello."))
            events = await collect(transport, {"endless", "next"}, 60)
    assert [(e.request_id, e.code) for e in events if isinstance(e, AudioFailed)] == [("endless", AUDIO_TOO_LONG)]
    assert not any(e.request_id == "endless" for e in events if not isinstance(e, AudioFailed))  # nothing of it
    assert [e.request_id for e in events if isinstance(e, AudioDone)] == ["next"]
    assert 0.4 < sum(audio_seconds("mp3", e.data) for e in events if isinstance(e, AudioChunk)) < 0.6


async def test_the_body_is_the_protocols_invocation_request_and_the_timings_its_headers() -> None:
    """The body is built by the protocol's own type, and any text can be sent: a lone surrogate (a command line can
    carry one) used to fail in the client with UnicodeEncodeError instead of reaching the endpoint."""
    with HostileHttp() as endpoint:
        async with BatchHttpTransport(endpoint.url) as transport:
            await transport.send(SpeechRequest("a", "Hello \udcff.", "bf_emma", 1.5))
            (*_, last) = await collect(transport, {"a"}, 60)
    assert [json.loads(body) for body in endpoint.bodies] == [
        InvocationRequest("Hello \udcff.", "bf_emma", 1.5, "mp3", stream=False).to_dict()]
    assert isinstance(last, AudioDone)
    assert last.timings == Timings(queue_wait_ms=3.0, synthesis_ms=12.5, encoding_ms=0.0, audio_s=0.5)
