"""The batch transport: one POST /invocations per request, the whole audio in the response.

This is the baseline the bidirectional design is measured against (the AWS post's "batch"): nothing is heard until
the endpoint has synthesized the entire text. Requests are served one at a time in order, like the WebSocket, so
the pipeline can use either without knowing which.
"""

from __future__ import annotations

import time
from typing import ClassVar

import httpx

from voicecli.audio.mp3_frames import frame_slices
from voicecli.tts.base import (
    AudioChunk,
    AudioDone,
    AudioStart,
    SpeechRequest,
    TransportError,
)
from voicecli.tts.serial import SerialTransport
from voicecli.wire.protocol import INVOCATIONS_PATH, PING_PATH, SAMPLE_RATE, Timings

CHUNK_BYTES = 8192
"""Audio is handed on in slices this size (whole MP3 frames), like a stream, so playback code is shared."""


def http_base(target: str) -> str:
    url = target.rstrip("/")
    for plain, secure in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(plain):
            url = secure + url[len(plain) :]
    return url.split(INVOCATIONS_PATH)[0]


class BatchHttpTransport(SerialTransport):
    name: ClassVar[str] = "batch"

    def __init__(self, url: str, token: str = "", timeout_s: float = 60.0) -> None:
        super().__init__()
        self.base = http_base(url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(base_url=self.base, headers=headers, timeout=timeout_s)

    async def connect(self) -> None:
        try:
            response = await self._client.get(PING_PATH)
        except httpx.HTTPError as exc:
            raise TransportError(
                f"cannot reach the TTS endpoint {self.base} ({exc}); start it with `voicecli serve`"
            ) from exc
        if response.status_code != 200:
            raise TransportError(
                f"the TTS endpoint {self.base} is not ready ({PING_PATH} answered {response.status_code})")
        self._start_worker()

    async def aclose(self) -> None:
        await self._stop_worker()
        await self._client.aclose()

    async def _serve(self, request: SpeechRequest) -> None:
        body = {"text": request.text, "voice": request.voice, "speed": request.speed, "format": request.format}
        sent = time.monotonic()
        try:
            response = await self._client.post(INVOCATIONS_PATH, json=body)
        except httpx.HTTPError as exc:
            advice = f"POST {self.base}{INVOCATIONS_PATH} failed ({exc}); is the endpoint running?"
            self._fail(request, "connection_lost", advice)
            return
        if self._is_cancelled(request.request_id):
            return
        if response.status_code != 200:
            try:
                detail = response.json()
                code, message = str(detail.get("code", response.status_code)), str(detail.get("message", ""))
            except ValueError:
                code, message = str(response.status_code), response.text[:200]
            self._fail(request, code, message)
            return
        self._emit(AudioStart(request.request_id, request.format, SAMPLE_RATE))
        audio = response.content
        pieces = frame_slices(audio, CHUNK_BYTES) if request.format == "mp3" else [
            audio[i : i + CHUNK_BYTES] for i in range(0, len(audio), CHUNK_BYTES)]
        for piece in pieces:
            self._emit(AudioChunk(request.request_id, piece))
        headers = response.headers
        timings = Timings(
            queue_wait_ms=float(headers.get("X-Queue-Wait-Ms", 0)),
            synthesis_ms=float(headers.get("X-Inference-Time-Ms", (time.monotonic() - sent) * 1000)),
            encoding_ms=0.0,
            audio_s=float(headers.get("X-Audio-Seconds", 0)),
        )
        self._emit(AudioDone(request.request_id, timings))
