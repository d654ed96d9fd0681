"""The batch transport: one POST /invocations per request, the whole audio in the response.

This is the baseline the bidirectional design is measured against (the AWS post's "batch"): nothing is heard until
the endpoint has synthesized the entire text. Requests are served one at a time in order, like the WebSocket, so
the pipeline can use either without knowing which.
"""

from __future__ import annotations

import json
import time
from typing import ClassVar

import httpx

from voicecli.tts.base import CONNECTION_LOST, MAX_MESSAGE_BYTES, SpeechRequest, TransportError
from voicecli.tts.serial import SerialTransport, WholeAnswer, invocation_body
from voicecli.wire.protocol import INVOCATIONS_PATH, PING_PATH, timings_from_headers


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
        sent = time.monotonic()
        answer = WholeAnswer(request)
        try:
            async with self._client.stream("POST", INVOCATIONS_PATH, content=invocation_body(request, stream=False),
                                           headers={"Content-Type": "application/json"}) as response:
                if response.status_code != 200:
                    self._refused(request, response.status_code, await _error_body(response))
                    return
                async for data in response.aiter_bytes():  # leaving the block early hangs up: the endpoint stops
                    if self._is_cancelled(request.request_id):
                        return
                    if not answer.feed(data):
                        self._too_much_audio(request)
                        return
        except httpx.HTTPError as exc:
            advice = f"POST {self.base}{INVOCATIONS_PATH} failed ({exc}); is the endpoint running?"
            self._fail(request, CONNECTION_LOST, advice)
            return
        if self._is_cancelled(request.request_id):
            return
        self._answer(answer, timings_from_headers(response.headers, (time.monotonic() - sent) * 1000))

    def _refused(self, request: SpeechRequest, status: int, body: bytes) -> None:
        """The endpoint's 4xx/5xx, in its own words when it gave them as JSON {"code", "message"}."""
        try:
            detail = json.loads(body)
        except ValueError:
            detail = None
        if isinstance(detail, dict):
            self._fail(request, str(detail.get("code", status)), str(detail.get("message", "")))
        else:
            self._fail(request, str(status), body[:200].decode("utf-8", "replace"))


async def _error_body(response: httpx.Response) -> bytes:
    """An error answer's body, at most MAX_MESSAGE_BYTES of it (the endpoint's are a line of JSON)."""
    body = bytearray()
    async for data in response.aiter_bytes():
        body += data
        if len(body) > MAX_MESSAGE_BYTES:
            break
    return bytes(body)


