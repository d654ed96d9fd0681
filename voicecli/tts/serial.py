"""Transports that make one call per request (POST /invocations, InvokeEndpoint...): a queue and one worker.

Serving requests one at a time keeps their events in request order, exactly like the persistent transports, so the
pipeline cannot tell the difference. A failure that dooms every later request (no credentials, endpoint not found)
marks the transport broken: queued requests fail at once with the same reason, and `send` refuses new ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import abstractmethod
from typing import ClassVar

from voicecli.tts.base import AudioFailed, SpeechRequest, TransportError, TTSTransport

log = logging.getLogger(__name__)


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

    @abstractmethod
    async def _serve(self, request: SpeechRequest) -> None:
        """Make the call for one request and emit its events."""
