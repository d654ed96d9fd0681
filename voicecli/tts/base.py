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
from typing import ClassVar, Final, Self

from voicecli.audio.mp3_frames import parse_header, split_frames
from voicecli.wire.protocol import DEFAULTS, SAMPLE_RATE, AudioFormat, Timings, WordTiming

MAX_MESSAGE_BYTES: Final = 1 << 20
"""Largest message a transport takes from the endpoint (1 MiB). The endpoint sends audio as whole MP3 frames grouped
into messages of at most 32 KiB (its audio_encoding.DEFAULT_MAX_MESSAGE_BYTES), and control messages of a few hundred
bytes; even a whole piece in one message (510 phonemes at speed 0.5: about 80 s, 640 KB at 64 kbps) fits. Why a
limit at all: without one, a single 100 MB message was read whole and decoded into 12,499 s of audio (3 GB)."""

MAX_REQUEST_AUDIO_S: Final = 600.0
"""Most audio one request may bring, in seconds. 2,000 characters (the endpoint's max_text_chars) of ordinary English
measured 8.45 characters a second at speed 0.5, the slowest: 237 s. 600 s leaves 2.5 times that. Text dense with long
numbers speaks longer (0.92 characters a second at speed 0.5: every 15-digit number is read out in words) and is
refused past this; the message says to split it. Why a limit: an endpoint that never stops sending would otherwise
fill the memory of whoever keeps the audio (3.5 GB in 20 s)."""

# The codes of failures the client decides on itself (the endpoint's own are voicecli.wire.protocol.ErrorCode).
CONNECTION_LOST: Final = "connection_lost"
MESSAGE_TOO_LARGE: Final = "message_too_large"
AUDIO_TOO_LONG: Final = "audio_too_long"
PROTOCOL_ERROR: Final = "protocol_error"


class TransportError(RuntimeError):
    """The endpoint cannot be reached or broke the protocol; the message says what to do."""


def audio_seconds(audio_format: str, data: bytes) -> float:
    """Seconds of audio in `data`: whole MP3 frames (each frame's header says its length) or PCM16 samples at the
    wire's rate. Raises ValueError when MP3 data is not whole frames, which the protocol promises it is."""
    if audio_format == "pcm16":
        return len(data) / 2 / SAMPLE_RATE
    frames, rest = split_frames(data)
    if rest:
        raise ValueError(f"{len(rest)} bytes after the last whole MP3 frame")
    seconds = 0.0
    for frame in frames:
        header = parse_header(frame)
        if header is not None:  # always: split_frames cut at headers it parsed
            seconds += header.samples_per_frame / header.sample_rate
    return seconds


class AudioBudget:
    """The audio one request has brought so far, against MAX_REQUEST_AUDIO_S: one count for every transport."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def spend(self, audio_format: str, data: bytes) -> bool:
        """Count `data` (whole units, see `audio_seconds`); False once the request is over the limit."""
        self.seconds += audio_seconds(audio_format, data)
        return self.seconds <= MAX_REQUEST_AUDIO_S


def too_much_audio() -> str:
    """What happened and what to do, for a request refused by its AudioBudget."""
    return (f"the endpoint sent more than {MAX_REQUEST_AUDIO_S:.0f} s of audio for one request, the client's limit "
            f"({DEFAULTS.limits.max_text_chars:,} characters of English at the slowest speed make about 240 s), and "
            "the rest was refused; if this text really speaks that long (long numbers at a slow speed), split it or "
            "raise the speed, otherwise the endpoint is misbehaving: check it with `voicecli doctor`")


def too_large(size: int | None) -> str:
    """What happened and what to do, for a message over MAX_MESSAGE_BYTES (`size`: as announced on the wire, which
    may be compressed; None: not known)."""
    sent = "" if size is None else f" ({size:,} bytes as sent)"
    return (f"the endpoint sent a message over the client's limit of {MAX_MESSAGE_BYTES // 1024} KiB{sent}, and the "
            "request it belonged to was refused (a voicecli endpoint sends at most 32 KiB at a time); check that the "
            "endpoint is a voicecli endpoint and up to date (`voicecli doctor`)")


@dataclass(frozen=True)
class SpeechRequest:
    """One piece of text to speak. `request_id` is the client's own and comes back on every event about it."""

    request_id: str
    text: str
    voice: str = "af_heart"
    speed: float = 1.0
    format: AudioFormat = "mp3"
    word_timings: bool = False
    """Ask for the words' times (AudioWords events). Only the session protocol has them (WebSocket, SageMaker
    bidi); a transport without them ignores the wish, and its user falls back to the audio's length."""


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


@dataclass(frozen=True)
class AudioWords:
    """When the words of one piece of a request are spoken, in ms from the start of the request's audio (as decoded:
    the endpoint's times match the samples the client decodes). Only for a request that asked (`word_timings`)."""

    request_id: str
    words: tuple[WordTiming, ...]
    at: float = field(default_factory=time.monotonic)


AudioEvent = AudioStart | AudioChunk | AudioDone | AudioFailed | AudioWords

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
