"""The bidirectional transport: ONE WebSocket per chat session, carrying every sentence of every turn.

Why persistent: a new connection per sentence costs a handshake each time, which is exactly the latency the design
exists to remove. Requests are pipelined (sentence N+1 goes out while N is being synthesized) and the endpoint
answers strictly in order, so audio is attributed to its sentence by position as well as by id.

Reconnect: if the connection drops mid-turn, the transport reconnects with backoff and re-sends every request whose
synthesis_complete did not arrive (`receiver.Reconnects`, shared with the SageMaker bidi transport, which also holds
the budget: so many reconnects within a time window). The endpoint's synthesis is deterministic for the same text,
voice and speed, so the re-sent request's audio repeats byte for byte; the bytes already delivered are skipped, so no
sentence is lost and none is heard twice.

Limits: no message over MAX_MESSAGE_BYTES is read (the WebSocket layer refuses it from its header, before the bytes
arrive, and closes the connection with 1009): the request it belonged to fails, the others are re-sent on a new
connection. The Receiver holds each request to MAX_REQUEST_AUDIO_S of audio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import ClassVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI, PayloadTooBig
from websockets.frames import CloseCode

from voicecli.tts.base import (
    MAX_MESSAGE_BYTES,
    MESSAGE_TOO_LARGE,
    SpeechRequest,
    TransportError,
    TTSTransport,
    too_large,
)
from voicecli.tts.receiver import Receiver, Reconnects, Send
from voicecli.wire.protocol import WS_PATH, Cancel, ClientMessage, Close, encode_message


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
        reconnect_window_s: float = 60.0,
    ) -> None:
        """`reconnect_attempts` is the budget of reconnects within any `reconnect_window_s` seconds (see
        `receiver.Reconnects`); the first waits `reconnect_base_delay_s`, each next one twice as long."""
        super().__init__()
        self.url = websocket_url(url)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._connect_timeout_s = connect_timeout_s
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._receiver = Receiver(self._emit)
        self._reconnects = Reconnects(self._receiver, f"the TTS endpoint {self.url}", reconnect_attempts,
                                      reconnect_window_s, reconnect_base_delay_s)
        self._send_lock = asyncio.Lock()
        self._closing = False
        self._idle = False
        self._broken: str | None = None
        self.reconnects = 0
        """How many times the connection was re-established (shown in the status bar, counted in tests)."""

    async def _open(self) -> ClientConnection:
        try:
            return await asyncio.wait_for(
                connect(self.url, additional_headers=self._headers, max_size=MAX_MESSAGE_BYTES, open_timeout=None,
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
        async with self._send_lock:  # tracked under the lock: a re-send in progress either has it or leaves it
            if self._idle:  # the endpoint closed the idle session: open a new one on demand
                await self._receiver.resend(await self._reopen())
                self._idle = False
                self._reader = asyncio.create_task(self._read_loop(), name="tts-websocket-reader")
            await self._send_or_drop(self._receiver.sent(request))

    async def cancel(self, request_id: str | None = None) -> None:
        self._receiver.forget(request_id)
        await self._send_quietly(Cancel(request_id))

    async def aclose(self) -> None:
        self._closing = True
        await self._send_quietly(Close())
        if self._ws is not None:
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

    async def _send_quietly(self, message: ClientMessage) -> None:
        """A message whose loss with the connection changes nothing (a cancel, the close)."""
        if self._ws is not None:
            async with self._send_lock:
                await self._send_or_drop(encode_message(message))

    async def _send_or_drop(self, text: str) -> None:
        """Send on the current connection; if it has dropped, the reader reconnects and re-sends what is unfinished."""
        assert self._ws is not None
        with contextlib.suppress(ConnectionClosed):
            await self._ws.send(text)

    async def _reopen(self) -> Send:
        self._ws = await self._open()
        self.reconnects += 1
        return self._send_or_drop

    async def _read_loop(self) -> None:
        while True:
            ws = self._ws
            assert ws is not None
            closed: ConnectionClosed | None = None
            try:
                async for frame in ws:
                    for refused in self._receiver.handle(frame):
                        await self._send_quietly(Cancel(refused))
            except ConnectionClosed as exc:
                closed = exc
            if self._closing:
                return
            if closed is not None and closed.sent is not None and closed.sent.code == CloseCode.MESSAGE_TOO_BIG:
                too_big = closed.__cause__  # the parser's PayloadTooBig, with the size the frame header announced
                size = getattr(too_big, "size", None) if isinstance(too_big, PayloadTooBig) else None
                self._receiver.fail_answering(MESSAGE_TOO_LARGE, too_large(size))
            if not self._receiver.outstanding:
                self._idle = True  # nothing to re-send: reconnect when the next sentence needs it, not now
                return
            self._broken = await self._reconnects.run(self._reopen, self._send_lock, _how_it_ended(ws))
            if self._broken is not None:
                return


def _how_it_ended(ws: ClientConnection) -> str:
    """The connection's end in words, for the message that says why reconnecting stopped."""
    code, reason = ws.close_code, ws.close_reason
    if code is None or code == CloseCode.ABNORMAL_CLOSURE:
        return "the connection broke without a close frame"
    return f"closed with code {code}{': ' + reason if reason else ''}"


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
