"""The persistent WebSocket transport against the real endpoint: pipelining, order, cancel, reconnect."""

from __future__ import annotations

import pytest

from tests.conftest import RunningServer
from tests.standins.tcp_proxy import CuttableProxy
from tests.tts.events import audio_by_request, collect
from voicecli.tts.base import AudioChunk, AudioDone, AudioEvent, AudioFailed, AudioStart, SpeechRequest, TransportError
from voicecli.tts.websocket import WebSocketTransport, websocket_url

pytestmark = pytest.mark.slow
SENTENCES = ["The first sentence is short.", "Here comes the second one.", "And a third to finish."]


def test_websocket_url_forms() -> None:
    assert websocket_url("http://h:1") == "ws://h:1/invocations-bidirectional-stream"
    assert websocket_url("wss://h/invocations-bidirectional-stream") == "wss://h/invocations-bidirectional-stream"


async def test_pipelined_requests_come_back_in_order_on_one_connection(server: RunningServer) -> None:
    transport = WebSocketTransport(server.http_url)
    await transport.connect()
    try:
        for turn in range(2):  # two turns reuse the same connection
            ids = [f"t{turn}-{i}" for i in range(len(SENTENCES))]
            for rid, text in zip(ids, SENTENCES, strict=True):
                await transport.send(SpeechRequest(rid, text))  # all sent before any audio is read
            events = await collect(transport, set(ids))
            starts = [e.request_id for e in events if isinstance(e, AudioStart)]
            dones = [e.request_id for e in events if isinstance(e, AudioDone)]
            assert starts == ids and dones == ids
            # never interleaved: every event of request i comes before any event of request i+1
            order = [e.request_id for e in events]
            assert order == sorted(order, key=ids.index)
            audio = audio_by_request(events)
            assert all(audio[rid][:1] == b"\xff" for rid in ids)
        assert transport.reconnects == 0
    finally:
        await transport.aclose()


async def test_cancel_drops_pending_audio_and_keeps_the_session(server: RunningServer) -> None:
    transport = WebSocketTransport(server.http_url)
    await transport.connect()
    try:
        long_text = " ".join(["This sentence is here to keep the synthesizer busy for a while."] * 4)
        await transport.send(SpeechRequest("a", long_text))
        await transport.send(SpeechRequest("b", long_text))
        first = await transport.next_event(120)
        assert isinstance(first, AudioStart) and first.request_id == "a"
        await transport.cancel(None)
        assert transport.outstanding == []
        await transport.send(SpeechRequest("c", "Still here."))
        events = await collect(transport, {"c"})
        assert [e.request_id for e in events if isinstance(e, AudioDone)] == ["c"]
        assert not any(isinstance(e, AudioDone) and e.request_id in ("a", "b") for e in events)
    finally:
        await transport.aclose()


async def test_endpoint_error_is_reported_per_request(server: RunningServer) -> None:
    transport = WebSocketTransport(server.http_url)
    await transport.connect()
    try:
        await transport.send(SpeechRequest("bad", "Hello.", voice="xx_nobody"))
        await transport.send(SpeechRequest("good", "Hello."))
        events = await collect(transport, {"bad", "good"})
        failed = [e for e in events if isinstance(e, AudioFailed)]
        assert failed and failed[0].request_id == "bad" and "af_heart" in failed[0].message
        assert any(isinstance(e, AudioDone) and e.request_id == "good" for e in events)
    finally:
        await transport.aclose()


async def test_dropped_connection_reconnects_and_loses_or_repeats_nothing(server: RunningServer) -> None:
    """Cut the connection after the first audio arrives: every sentence's audio must still arrive exactly once."""
    reference = WebSocketTransport(server.http_url)
    await reference.connect()
    ids = ["r0", "r1", "r2"]
    for rid, text in zip(ids, SENTENCES, strict=True):
        await reference.send(SpeechRequest(rid, text))
    expected = audio_by_request(await collect(reference, set(ids)))
    await reference.aclose()

    proxy = await CuttableProxy(server.port).start()
    transport = WebSocketTransport(proxy.url)
    await transport.connect()
    try:
        for rid, text in zip(ids, SENTENCES, strict=True):
            await transport.send(SpeechRequest(rid, text))
        events: list[AudioEvent] = []
        while not any(isinstance(e, AudioChunk) for e in events):
            events.append(await transport.next_event(120))
        proxy.cut()
        events += await collect(transport, set(ids) - {e.request_id for e in events if isinstance(e, AudioDone)})
        assert transport.reconnects == 1 and proxy.connections == 2
        assert audio_by_request(events) == expected  # byte for byte: nothing lost, nothing twice
        assert [e.request_id for e in events if isinstance(e, AudioStart)] == ids  # one start each
    finally:
        await transport.aclose()
        await proxy.stop()


async def test_endpoint_gone_fails_outstanding_requests_with_advice(server: RunningServer) -> None:
    proxy = await CuttableProxy(server.port).start()
    transport = WebSocketTransport(proxy.url, reconnect_attempts=2, reconnect_base_delay_s=0.05)
    await transport.connect()
    try:
        await transport.send(SpeechRequest("x", "A sentence that will not be heard."))
        proxy.refuse = True
        proxy.cut()
        event = await transport.next_event(60)
        assert isinstance(event, AudioFailed) and event.code == "connection_lost"
        assert "voicecli doctor" in event.message
        with pytest.raises(TransportError):
            await transport.send(SpeechRequest("y", "Too late."))
    finally:
        await transport.aclose()
        await proxy.stop()


async def test_unreachable_endpoint_says_how_to_start_one() -> None:
    transport = WebSocketTransport("ws://127.0.0.1:9", connect_timeout_s=2)
    with pytest.raises(TransportError, match="voicecli serve"):
        await transport.connect()
