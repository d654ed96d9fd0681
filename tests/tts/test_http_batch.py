"""The batch transport (POST /invocations per request) against the real endpoint."""

from __future__ import annotations

import miniaudio
import pytest

from tests.conftest import RunningServer
from voicecli.audio.mp3_frames import frame_length
from voicecli.tts.base import AudioChunk, AudioDone, AudioFailed, AudioStart, SpeechRequest, TransportError
from voicecli.tts.http_batch import BatchHttpTransport, http_base

pytestmark = pytest.mark.slow


def test_http_base_accepts_websocket_urls() -> None:
    assert http_base("ws://h:1/invocations-bidirectional-stream") == "http://h:1"
    assert http_base("https://h/") == "https://h"


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
