"""Transports that make one call per request (POST /invocations, InvokeEndpoint...): a queue and one worker.

Serving requests one at a time keeps their events in request order, exactly like the persistent transports, so the
pipeline cannot tell the difference. A failure that dooms every later request (no credentials, endpoint not found)
marks the transport broken: queued requests fail at once with the same reason, and `send` refuses new ones.

What they share besides: the call's body (`invocation_body`, the protocol's InvocationRequest) and, for the calls that
answer with the whole audio, its reading within the client's limit and its handing on in slices (`WholeAnswer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from abc import abstractmethod
from typing import ClassVar

from voicecli.audio.mp3_frames import frame_slices
from voicecli.audio.streams import aligner_for
from voicecli.tts.base import (
    AUDIO_TOO_LONG,
    AudioBudget,
    AudioChunk,
    AudioDone,
    AudioFailed,
    AudioStart,
    SpeechRequest,
    TransportError,
    TTSTransport,
    too_much_audio,
)
from voicecli.wire.protocol import SAMPLE_RATE, InvocationRequest, Timings

log = logging.getLogger(__name__)

CHUNK_BYTES = 8192
"""A whole answer is handed on in slices this size (whole MP3 frames), like a stream, so playback code is shared."""


def invocation_body(request: SpeechRequest, stream: bool) -> bytes:
    """The body of the endpoint's POST /invocations (SageMaker passes it through untouched) for one request: the
    protocol's InvocationRequest, the type the endpoint reads it into. ASCII escapes keep any text sendable: a lone
    surrogate (a command line can carry one) has no UTF-8 form, and the endpoint answers its escape with
    invalid_utf8."""
    body = InvocationRequest(text=request.text, voice=request.voice, speed=request.speed, format=request.format,
                             stream=stream)
    return json.dumps(body.to_dict()).encode("ascii")


class WholeAnswer:
    """One request's whole audio, read from a body cut anywhere and held to MAX_REQUEST_AUDIO_S, so a huge or endless
    body costs a bounded amount of memory (it used to be read whole, however large)."""

    def __init__(self, request: SpeechRequest) -> None:
        self.request = request
        self._aligner = aligner_for(request.format)
        self._budget = AudioBudget()
        self._parts: list[bytes] = []

    def feed(self, data: bytes) -> bool:
        """Keep the whole units `data` completes; False once the answer is over the limit (keep nothing more)."""
        whole = self._aligner.feed(data)
        if not self._budget.spend(self.request.format, whole):
            self._parts.clear()
            return False
        self._parts.append(whole)
        return True

    def pieces(self) -> list[bytes]:
        """The audio in slices of whole units of about CHUNK_BYTES (an incomplete unit at the end is dropped)."""
        left = self._aligner.flush()
        if left:
            log.warning("%s: %d trailing bytes did not form a whole unit", self.request.request_id, left)
        audio = b"".join(self._parts)
        if self.request.format == "mp3":
            return frame_slices(audio, CHUNK_BYTES)
        return [audio[i : i + CHUNK_BYTES] for i in range(0, len(audio), CHUNK_BYTES)]


class SerialTransport(TTSTransport):
    persistent: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._queue: asyncio.Queue[SpeechRequest] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._current: str | None = None
        self._cancelled: set[str] = set()
        self._broken: str | None = None

    def _start_worker(self) -> None:
        self._worker = asyncio.create_task(self._work(), name=f"tts-{self.name}-worker")

    async def send(self, request: SpeechRequest) -> None:
        if self._broken is not None:
            raise TransportError(self._broken)
        if self._worker is None:
            raise TransportError("the TTS transport is not connected: call connect() first")
        self._queue.put_nowait(request)

    async def cancel(self, request_id: str | None = None) -> None:
        kept: list[SpeechRequest] = []
        while not self._queue.empty():
            queued = self._queue.get_nowait()
            if request_id is not None and queued.request_id != request_id:
                kept.append(queued)
        for queued in kept:
            self._queue.put_nowait(queued)
        if self._current is not None and request_id in (None, self._current):
            self._cancelled.add(self._current)

    async def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    async def _work(self) -> None:
        while True:
            request = await self._queue.get()
            self._current = request.request_id
            try:
                await self._serve(request)
            except Exception as exc:  # a bug must not silently stop the session's audio
                log.exception("%s transport failed on %s", self.name, request.request_id)
                self._emit(AudioFailed(request.request_id, "transport_error", f"{exc.__class__.__name__}: {exc}"))
            finally:
                self._current = None
                self._cancelled.discard(request.request_id)

    def _is_cancelled(self, request_id: str) -> bool:
        return request_id in self._cancelled

    def _fail(self, request: SpeechRequest, code: str, message: str, fatal: bool = False) -> None:
        if self._is_cancelled(request.request_id):
            return
        self._emit(AudioFailed(request.request_id, code, message))
        if fatal:
            self._broken = message
            while not self._queue.empty():
                queued = self._queue.get_nowait()
                self._emit(AudioFailed(queued.request_id, code, message))

    def _answer(self, answer: WholeAnswer, timings: Timings | None) -> None:
        """A whole answer read (`feed` never said over the limit): its events, start to done."""
        rid = answer.request.request_id
        self._emit(AudioStart(rid, answer.request.format, SAMPLE_RATE))
        for piece in answer.pieces():
            self._emit(AudioChunk(rid, piece))
        self._emit(AudioDone(rid, timings))

    def _too_much_audio(self, request: SpeechRequest) -> None:
        self._fail(request, AUDIO_TOO_LONG, too_much_audio())

    @abstractmethod
    async def _serve(self, request: SpeechRequest) -> None:
        """Make the call for one request and emit its events."""
