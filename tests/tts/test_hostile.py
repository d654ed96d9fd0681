"""The WebSocket transport against a hostile endpoint served for real on 127.0.0.1 (tests/tts/hostile.py).

Each test replays one way an endpoint can misbehave and checks that the request it concerns fails with a message
saying what happened, that the other requests of the session are still served, and that reconnecting stops on a
budget with the real cause. Every stream the endpoint sends is bounded, and every wait has a timeout.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.tts.events import collect
from tests.tts.hostile import HostileEndpoint, Session, complete, honest, messages, start
from voicecli.tts.base import (
    AUDIO_TOO_LONG,
    CONNECTION_LOST,
    MAX_MESSAGE_BYTES,
    MAX_REQUEST_AUDIO_S,
    MESSAGE_TOO_LARGE,
    PROTOCOL_ERROR,
    AudioChunk,
    AudioDone,
    AudioEvent,
    AudioFailed,
    SpeechRequest,
    TransportError,
    audio_seconds,
)
from voicecli.tts.receiver import MAX_IGNORED
from voicecli.tts.websocket import WebSocketTransport

TIMEOUT_S = 20.0
"""Longest wait for any one event (the storm tests must end well within it)."""


def failures(events: list[AudioEvent]) -> list[tuple[str | None, str]]:
    return [(event.request_id, event.code) for event in events if isinstance(event, AudioFailed)]


def done(events: list[AudioEvent]) -> list[str]:
    return [event.request_id for event in events if isinstance(event, AudioDone)]


def heard_s(events: list[AudioEvent], rid: str) -> float:
    return sum(audio_seconds("mp3", event.data) for event in events
               if isinstance(event, AudioChunk) and event.request_id == rid)


async def test_audio_past_the_limit_fails_that_request_and_the_next_one_is_served() -> None:
    """An endless stream (bounded here at twice the limit) used to be taken whole: 3.5 GB in 20 s."""
    async def script(session: Session) -> None:
        await session.stream(await session.request(), 2 * MAX_REQUEST_AUDIO_S)
        await honest(session)

    async with HostileEndpoint(script) as endpoint, WebSocketTransport(endpoint.http_url) as transport:
        await transport.send(SpeechRequest("endless", "Hello."))
        await transport.send(SpeechRequest("next", "Hello."))
        events = await collect(transport, {"endless", "next"}, TIMEOUT_S)
    assert failures(events) == [("endless", AUDIO_TOO_LONG)]
    message = next(event.message for event in events if isinstance(event, AudioFailed))
    assert f"more than {MAX_REQUEST_AUDIO_S:.0f} s of audio" in message and "split it" in message
    assert MAX_REQUEST_AUDIO_S - 5 < heard_s(events, "endless") <= MAX_REQUEST_AUDIO_S
    assert done(events) == ["next"] and heard_s(events, "next") > 0.4
    assert (0, "endless") in endpoint.sent("cancel")  # the endpoint was told to stop
    assert transport.reconnects == 0


async def test_a_message_over_the_limit_fails_its_request_and_the_others_are_resent() -> None:
    """One 100 MB message used to be read whole and decoded (3 GB, exit 0); now it is refused from its header."""
    size = 2 * MAX_MESSAGE_BYTES

    async def script(session: Session) -> None:
        if session.index == 0:
            rid = await session.request()
            await session.send(start(rid), next(messages(size / 8000, size)), complete(rid))
        await honest(session)

    async with HostileEndpoint(script) as endpoint, WebSocketTransport(endpoint.http_url) as transport:
        await transport.send(SpeechRequest("huge", "Hello."))
        await transport.send(SpeechRequest("after", "Hello."))
        events = await collect(transport, {"huge", "after"}, TIMEOUT_S)
    assert failures(events) == [("huge", MESSAGE_TOO_LARGE)]
    message = next(event.message for event in events if isinstance(event, AudioFailed))
    assert f"{MAX_MESSAGE_BYTES // 1024} KiB" in message and "bytes" in message
    assert heard_s(events, "huge") == 0
    assert done(events) == ["after"] and heard_s(events, "after") > 0.4
    assert [rid for index, rid in endpoint.sent() if index == 1] == ["after"]  # re-sent, and only it
    assert transport.reconnects == 1


OUT_OF_ORDER: dict[str, Callable[[str], list[str | bytes]]] = {
    "audio before any synthesis_start": lambda rid: [next(messages(0.5)), start(rid), complete(rid)],
    "synthesis_complete for request 'say' before its synthesis_start": lambda rid: [complete(rid)],
    "synthesis_complete for request 'ghost', which this client did not send": lambda rid: [complete("ghost"),
                                                                                          complete(rid)],
    "synthesis_start for request 'ghost', which this client did not send": lambda rid: [
        start("ghost"), *messages(0.5), complete("ghost"), start(rid), complete(rid)],
}


@pytest.mark.parametrize("what", list(OUT_OF_ORDER))
async def test_frames_out_of_order_are_a_protocol_error_for_that_request(what: str) -> None:
    """They used to end as a request with no audio and no error (`voicecli say` exit 0, 0 s)."""
    async def script(session: Session) -> None:
        await session.send(*OUT_OF_ORDER[what](await session.request()))
        await honest(session)

    async with HostileEndpoint(script) as endpoint, WebSocketTransport(endpoint.http_url) as transport:
        await transport.send(SpeechRequest("say", "Hello."))
        await transport.send(SpeechRequest("next", "Hello."))
        events = await collect(transport, {"say", "next"}, TIMEOUT_S)
    assert failures(events) == [("say", PROTOCOL_ERROR)]
    message = next(event.message for event in events if isinstance(event, AudioFailed))
    assert "broke the protocol" in message and what in message
    assert done(events) == ["next"] and heard_s(events, "next") > 0.4
    assert transport.reconnects == 0 and endpoint.connections == 1


async def test_ids_the_endpoint_never_ends_cannot_grow_the_clients_memory() -> None:
    async def script(session: Session) -> None:
        await session.request()
        await session.send(*(start(f"ghost-{index}") for index in range(4 * MAX_IGNORED)))
        await honest(session)

    async with HostileEndpoint(script) as endpoint, WebSocketTransport(endpoint.http_url) as transport:
        await transport.send(SpeechRequest("say", "Hello."))
        assert failures(await collect(transport, {"say"}, TIMEOUT_S)) == [("say", PROTOCOL_ERROR)]
        for _ in range(4 * MAX_IGNORED - 1):  # each later ghost answers nothing outstanding: an error of the session
            event = await transport.next_event(TIMEOUT_S)
            assert isinstance(event, AudioFailed) and event.request_id is None and event.code == PROTOCOL_ERROR
        assert len(transport._receiver._ignored) <= MAX_IGNORED
        await transport.send(SpeechRequest("next", "Hello."))  # and the session goes on
        assert done(await collect(transport, {"next"}, TIMEOUT_S)) == ["next"]


async def test_an_endpoint_that_drops_every_connection_gets_a_bounded_number_of_reconnects() -> None:
    """It used to get 581 reconnects in 60 s: each successful open reset the budget."""
    async def script(session: Session) -> None:
        if session.index == 0:
            await session.request()  # the first connection serves the warm-up ping, then drops at the request
        # every later one is dropped as soon as it is accepted

    async with HostileEndpoint(script) as endpoint:
        transport = WebSocketTransport(endpoint.http_url, reconnect_base_delay_s=0.01)  # 6 within 60 s
        async with transport:
            await transport.send(SpeechRequest("x", "Hello."))
            events = await collect(transport, {"x"}, TIMEOUT_S)
            assert failures(events) == [("x", CONNECTION_LOST)]
            message = next(event.message for event in events if isinstance(event, AudioFailed))
            assert "accepted the connection and dropped it again, 6 times" in message
            assert "closed with code 1000" in message and "voicecli doctor" in message
            assert transport.reconnects == 6 and endpoint.connections == 7
            with pytest.raises(TransportError, match="dropped it again"):
                await transport.send(SpeechRequest("y", "Hello."))


async def test_an_endpoint_gone_for_good_is_named_unreachable() -> None:
    async def script(session: Session) -> None:
        await session.request()
        session.endpoint.stop()  # stops listening and closes this connection: nobody answers any more

    async with HostileEndpoint(script) as endpoint:
        transport = WebSocketTransport(endpoint.http_url, reconnect_attempts=3, reconnect_base_delay_s=0.01)
        async with transport:
            await transport.send(SpeechRequest("x", "Hello."))
            events = await collect(transport, {"x"}, TIMEOUT_S)
    assert failures(events) == [("x", CONNECTION_LOST)]
    message = next(event.message for event in events if isinstance(event, AudioFailed))
    assert "could not reconnect: 3 tries" in message and "ConnectionRefusedError" in message
    assert transport.reconnects == 0 and endpoint.connections == 1
