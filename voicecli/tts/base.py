"""One interface for every way a sentence can travel to a Kokoro endpoint and come back as audio.

The pipeline holds a `TTSTransport` and never knows which one: a persistent WebSocket, a POST per request, or the
SageMaker APIs. Like httpx's transports, each implementation owns its connection and speaks the wire protocol
(`voicecli.wire.protocol`); what comes out is the same stream of typed events, strictly in request order.

Every transport is an async context manager, as httpx's clients are: `async with transport:` connects (and warms),
and however the block ends (done, error, cancelled) the transport is closed, by the one clean-up path below. A
transport whose connect fails is closed too, so whatever it opened on the way (an HTTP client, a half-open stream)
is released. `connect` and `aclose` stay for code that must hold a transport across calls (a chat session).
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import ClassVar, Self

from voicecli.wire.protocol import AudioFormat, Timings


class TransportError(RuntimeError):
    """The endpoint cannot be reached or broke the protocol; the message says what to do."""


@dataclass(frozen=True)
class SpeechRequest:
    """One piece of text to speak. `request_id` is the client's own and comes back on every event about it."""

    request_id: str
    text: str
    voice: str = "af_heart"
    speed: float = 1.0
    format: AudioFormat = "mp3"


@dataclass(frozen=True)
class AudioStart:
    request_id: str
    format: AudioFormat
    sample_rate: int
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class AudioChunk:
    """Encoded audio of one request: whole MP3 frames, or PCM16 little-endian samples (framing removed)."""

    request_id: str
    data: bytes
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class AudioDone:
    request_id: str
    timings: Timings | None
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class AudioFailed:
    """The endpoint refused or failed this request; the session goes on."""

    request_id: str | None
    code: str
    message: str
    at: float = field(default_factory=time.monotonic)


AudioEvent = AudioStart | AudioChunk | AudioDone | AudioFailed

log = logging.getLogger(__name__)


class TTSTransport(ABC):
    """Sends speech requests and yields their audio events in request order.

    Contract: `send` returns as soon as the request is on its way (callers pipeline sentence N+1 while N is being
    synthesized); `events` yields every request's events in the order requests were sent; `cancel` drops what has
    not been heard yet; the connection (if any) survives cancels and is closed only by `aclose` (or by leaving
    `async with transport:`).
    """

    name: ClassVar[str]
    persistent: ClassVar[bool]
    """True when one connection carries every request of the session (the point of bidi streaming)."""

    def __init__(self) -> None:
        self._events: asyncio.Queue[AudioEvent] = asyncio.Queue()

    @abstractmethod
    async def connect(self) -> None:
        """Open (and for persistent transports, warm) the connection. Raises TransportError with advice."""

    @abstractmethod
    async def send(self, request: SpeechRequest) -> None:
        """Queue one request; returns once it is sent, not when its audio arrives."""

    @abstractmethod
    async def cancel(self, request_id: str | None = None) -> None:
        """Drop one request (None: all pending) so no more of its audio arrives; the connection stays open."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the session politely (the protocol's close message where there is one)."""

    async def __aenter__(self) -> Self:
        """Connect (and warm); if that fails, close what was opened on the way before the error goes on."""
        try:
            await self.connect()
        except BaseException:
            await self._close_quietly()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._close_quietly()

    async def _close_quietly(self) -> None:
        """The one clean-up path: close, and never let a failed goodbye hide the error that ended the block (nor
        fail a session whose work is done); the failure is logged instead."""
        try:
            await self.aclose()
        except Exception:
            log.warning("closing the %s transport failed", self.name, exc_info=True)

    async def events(self) -> AsyncIterator[AudioEvent]:
        """Audio events of every request, in request order. Never ends by itself; stop iterating when done."""
        while True:
            yield await self._events.get()

    async def next_event(self, timeout: float | None = None) -> AudioEvent:
        """The next event, or TimeoutError after `timeout` seconds (a stalled endpoint must not hang a turn)."""
        return await asyncio.wait_for(self._events.get(), timeout)

    def _emit(self, event: AudioEvent) -> None:
        self._events.put_nowait(event)
