"""The transport lifecycle every transport shares: `async with transport:` connects and always closes."""

from __future__ import annotations

import pytest
from websockets.protocol import State

from tests.conftest import RunningServer
from voicecli.tts.base import AudioDone, SpeechRequest, TransportError
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.tts.websocket import WebSocketTransport


async def test_a_transport_whose_connect_fails_is_closed_before_the_error_goes_on() -> None:
    transport = BatchHttpTransport("http://127.0.0.1:9")
    with pytest.raises(TransportError, match="voicecli serve"):
        async with transport:
            pytest.fail("the block must not run when connect failed")
    assert transport._client.is_closed  # the HTTP client it made is released, not leaked


@pytest.mark.slow
async def test_an_error_inside_the_block_closes_the_connection_and_is_not_masked(server: RunningServer) -> None:
    transport = WebSocketTransport(server.http_url)
    with pytest.raises(LookupError, match="mid-turn"):
        async with transport as opened:
            assert opened is transport
            await transport.send(SpeechRequest("r", "Hello there."))
            while not isinstance(await transport.next_event(120), AudioDone):
                pass
            raise LookupError("mid-turn")
    assert transport._ws is not None and transport._ws.state is State.CLOSED
    assert transport._reader is not None and transport._reader.done()


@pytest.mark.slow
async def test_leaving_the_block_normally_closes_too_and_a_second_close_is_harmless(server: RunningServer) -> None:
    async with BatchHttpTransport(server.http_url) as transport:
        await transport.send(SpeechRequest("r", "Hi."))
        while not isinstance(await transport.next_event(120), AudioDone):
            pass
    assert transport._client.is_closed and transport._worker is None
    await transport.aclose()
