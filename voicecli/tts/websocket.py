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
from dataclasses import dataclass
from typing import ClassVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from voicecli.protocol import (
    Cancel,
    CancelAck,
    Close,
    Error,
    Mp3Audio,
    PcmAudio,
    ProtocolError,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    classify_frame,
    encode_message,
)
from voicecli.tts.base import (
    AudioChunk,
    AudioDone,
    AudioFailed,
    AudioStart,
    SpeechRequest,
    TransportError,
    TTSTransport,
)

WS_PATH = "/invocations-bidirectional-stream"


@dataclass
class _Outstanding:
    """A request sent but not finished, with how much of its audio was already handed on."""

    request: SpeechRequest
    started: bool = False
    delivered: int = 0
    skip: int = 0


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
        self._outstanding: dict[str, _Outstanding] = {}
        self._send_lock = asyncio.Lock()
        self._closing = False
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
        self._outstanding[request.request_id] = _Outstanding(request)
        async with self._send_lock:
            with contextlib.suppress(ConnectionClosed):  # the reader reconnects and re-sends it
                await self._ws.send(_wire(request))

    async def cancel(self, request_id: str | None = None) -> None:
        dropped = list(self._outstanding) if request_id is None else [request_id]
        for rid in dropped:
            self._outstanding.pop(rid, None)
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
        return list(self._outstanding)

    async def _read_loop(self) -> None:
        while True:
            assert self._ws is not None
            try:
                async for frame in self._ws:
                    self._handle(frame)
            except ConnectionClosed:
                pass
            if self._closing:
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
                for entry in list(self._outstanding.values()):
                    entry.skip, entry.delivered = entry.delivered, 0
                    await ws.send(_wire(entry.request))
            return True
        self._broken = (f"lost the connection to {self.url} and could not reconnect after {self._attempts} "
                        "tries; check that the endpoint is running (`voicecli doctor`)")
        for rid in list(self._outstanding):
            self._emit(AudioFailed(rid, "connection_lost", self._broken))
        self._outstanding.clear()
        return False

    def _handle(self, frame: str | bytes) -> None:
        try:
            kind = classify_frame(frame)
        except ProtocolError as exc:
            self._emit(AudioFailed(None, str(exc.code), f"unreadable frame from the endpoint: {exc.message}"))
            return
        if isinstance(kind, Mp3Audio | PcmAudio):
            self._audio(kind.data if isinstance(kind, Mp3Audio) else kind.samples)
            return
        message = kind.message
        if isinstance(message, SynthesisStart):
            entry = self._outstanding.get(str(message.request_id))
            if entry is not None and not entry.started:
                entry.started = True
                self._current = entry
                self._emit(AudioStart(entry.request.request_id, message.format, message.sample_rate))
            elif entry is not None:
                self._current = entry
        elif isinstance(message, SynthesisComplete):
            entry = self._outstanding.pop(str(message.request_id), None)
            if entry is not None:
                self._emit(AudioDone(entry.request.request_id, message.timings))
        elif isinstance(message, Error):
            rid = None if message.request_id is None else str(message.request_id)
            if rid is None or self._outstanding.pop(rid, None) is not None:
                self._emit(AudioFailed(rid, message.code, message.message))
        elif isinstance(message, CancelAck):
            for dropped in message.dropped:
                self._outstanding.pop(str(dropped), None)

    _current: _Outstanding | None = None

    def _audio(self, data: bytes) -> None:
        """Audio belongs to the request whose synthesis_start came last (the endpoint never interleaves)."""
        entry = self._current
        if entry is None or entry.request.request_id not in self._outstanding:
            return  # audio of a cancelled request still in flight
        if entry.skip:
            dropped = min(entry.skip, len(data))
            entry.skip -= dropped
            entry.delivered += dropped
            data = data[dropped:]
            if not data:
                return
        entry.delivered += len(data)
        self._emit(AudioChunk(entry.request.request_id, data))


def _wire(request: SpeechRequest) -> str:
    return encode_message(SynthesisRequest(text=request.text, voice=request.voice, speed=request.speed,
                                           request_id=request.request_id, format=request.format))
