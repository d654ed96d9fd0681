"""The bidirectional transport: ONE WebSocket per chat session, carrying every sentence of every turn.

Why persistent: a new connection per sentence costs a handshake each time, which is exactly the latency the design
exists to remove. Requests are pipelined (sentence N+1 goes out while N is being synthesized) and the endpoint
answers strictly in order, so audio is attributed to its sentence by position as well as by id.

Reconnect: if the connection drops mid-turn, the transport reconnects with backoff and re-sends every request whose
synthesis_complete did not arrive. The endpoint's synthesis is deterministic for the same text, voice and speed, so
the re-sent request's audio repeats byte for byte; the bytes already delivered are skipped, so no sentence is lost
and none is heard twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import ClassVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from voicecli.tts.base import SpeechRequest, TransportError, TTSTransport
from voicecli.tts.receiver import Receiver
from voicecli.wire.protocol import WS_PATH, Cancel, Close, encode_message


def websocket_url(target: str) -> str:
    """Accept http(s):// or ws(s):// base URLs, with or without the route, and return the WebSocket URL."""
    url = target.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if url.startswith(plain):
            url = secure + url[len(plain) :]
    return url if url.endswith(WS_PATH) else url + WS_PATH


class WebSocketTransport(TTSTransport):
    name: ClassVar[str] = "websocket"
    persistent: ClassVar[bool] = True

    def __init__(
        self,
        url: str,
        token: str = "",
        connect_timeout_s: float = 10.0,
        reconnect_attempts: int = 6,
        reconnect_base_delay_s: float = 0.1,
    ) -> None:
        super().__init__()
        self.url = websocket_url(url)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._connect_timeout_s = connect_timeout_s
        self._attempts = reconnect_attempts
        self._base_delay_s = reconnect_base_delay_s
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._receiver = Receiver(self._emit)
        self._send_lock = asyncio.Lock()
        self._closing = False
        self._idle = False
        self._broken: str | None = None
        self.reconnects = 0
        """How many times the connection was re-established (shown in the status bar, counted in tests)."""

    async def _open(self) -> ClientConnection:
        try:
            return await asyncio.wait_for(
                connect(self.url, additional_headers=self._headers, max_size=None, open_timeout=None,
                        ping_interval=20, ping_timeout=60),
                self._connect_timeout_s,
            )
        except InvalidStatus as exc:
            raise TransportError(_refusal(self.url, exc)) from exc
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise TransportError(
                f"cannot open the TTS WebSocket {self.url} ({exc.__class__.__name__}: {exc}); is the endpoint "
                "running? Start one with `voicecli serve` or use --endpoint local"
            ) from exc

    async def connect(self) -> None:
        self._ws = await self._open()
        pong = await self._ws.ping()
        await asyncio.wait_for(pong, self._connect_timeout_s)  # warm: one full round trip before the first turn
        self._reader = asyncio.create_task(self._read_loop(), name="tts-websocket-reader")

    async def send(self, request: SpeechRequest) -> None:
        if self._broken is not None:
            raise TransportError(self._broken)
        if self._ws is None:
            raise TransportError("the TTS transport is not connected: call connect() first")
        message = self._receiver.sent(request)
        async with self._send_lock:
            if self._idle:  # the endpoint closed the idle session: open a new one on demand
                self._ws = await self._open()
                self._idle = False
                self.reconnects += 1
                self._reader = asyncio.create_task(self._read_loop(), name="tts-websocket-reader")
            with contextlib.suppress(ConnectionClosed):  # the reader reconnects and re-sends it
                await self._ws.send(message)

    async def cancel(self, request_id: str | None = None) -> None:
        self._receiver.forget(request_id)
        if self._ws is not None:
            async with self._send_lock:
                with contextlib.suppress(ConnectionClosed):
                    await self._ws.send(encode_message(Cancel(request_id)))

    async def aclose(self) -> None:
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(ConnectionClosed):
                async with self._send_lock:
                    await self._ws.send(encode_message(Close()))
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 2.0)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    @property
    def outstanding(self) -> list[str]:
        """Ids of requests sent whose audio has not finished arriving."""
        return self._receiver.outstanding

    async def _read_loop(self) -> None:
        while True:
            assert self._ws is not None
            try:
                async for frame in self._ws:
                    self._receiver.handle(frame)
            except ConnectionClosed:
                pass
            if self._closing:
                return
            if not self._receiver.outstanding:
                self._idle = True  # nothing to re-send: reconnect when the next sentence needs it, not now
                return
            if not await self._reconnect():
                return

    async def _reconnect(self) -> bool:
        """Re-open with exponential backoff and re-send unfinished requests; False when the endpoint is gone."""
        delay = self._base_delay_s
        for _ in range(self._attempts):
            await asyncio.sleep(delay)
            delay *= 2
            try:
                ws = await self._open()
            except TransportError:
                continue
            self._ws = ws
            self.reconnects += 1
            async with self._send_lock:
                for message in self._receiver.resend():
                    await ws.send(message)
            return True
        self._broken = (f"lost the connection to {self.url} and could not reconnect after {self._attempts} "
                        "tries; check that the endpoint is running (`voicecli doctor`)")
        self._receiver.fail_all("connection_lost", self._broken)
        return False


def _refusal(url: str, exc: InvalidStatus) -> str:
    """Why the endpoint refused the handshake, in its own words when it gave them (401 token, 503 limits)."""
    status = exc.response.status_code
    try:
        detail = json.loads(exc.response.body or b"{}").get("message", "")
    except ValueError:
        detail = ""
    if status == 401:
        advice = "set endpoint.token (or VOICECLI_ENDPOINT__TOKEN) to the token the endpoint was started with"
    elif status == 503:
        advice = "the endpoint is at its session limit; close another chat or raise its --max-sessions"
    else:
        advice = "check the endpoint URL and that it is a voicecli endpoint"
    return f"the TTS endpoint {url} refused the connection (HTTP {status}{': ' + detail if detail else ''}); {advice}"
