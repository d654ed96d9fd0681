"""The two request-per-call SageMaker transports: InvokeEndpoint (batch) and InvokeEndpointWithResponseStream.

Both go through boto3, whose calls block, so each call runs in a worker thread while the event loop keeps playing
audio. Requests are served one at a time in the order sent (the container's POST /invocations has no request ids,
so order is the only attribution), which keeps the contract of `TTSTransport`: same events, same order, whichever
transport the pipeline holds.

- Batch: nothing is heard until the container has synthesized the whole text (the baseline the bidi design beats).
- Response stream: audio arrives as the container makes it, in PayloadParts cut at arbitrary byte offsets, so the
  bytes are re-aligned to whole MP3 frames / whole samples before they reach the player. A fault can arrive after
  HTTP 200 (ModelStreamError, InternalStreamFailure): the request then ends with AudioFailed, the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any, ClassVar

from voicecli.audio.streams import aligner_for
from voicecli.tts.base import (
    AudioBudget,
    AudioChunk,
    AudioDone,
    AudioStart,
    SpeechRequest,
)
from voicecli.tts.sagemaker_common import Failure, SageMakerTarget, explain, explain_botocore, runtime_client
from voicecli.tts.serial import CHUNK_BYTES, SerialTransport, WholeAnswer, invocation_body
from voicecli.wire.protocol import SAMPLE_RATE

log = logging.getLogger(__name__)


class _InvokeTransport(SerialTransport):
    """One SageMaker call per request, in order."""

    def __init__(self, target: SageMakerTarget) -> None:
        super().__init__()
        self.target = target
        self._client: Any = None

    async def connect(self) -> None:
        """Build the boto3 client and check that credentials exist (there is no cheap runtime ping to call)."""
        self._client, _ = await asyncio.to_thread(runtime_client, self.target)
        self._start_worker()

    async def aclose(self) -> None:
        await self._stop_worker()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()

    def _fail_with(self, request: SpeechRequest, failure: Failure) -> None:
        self._fail(request, failure.code, failure.message, failure.fatal)


class SageMakerBatchTransport(_InvokeTransport):
    """InvokeEndpoint: the whole audio of a request in one response."""

    name: ClassVar[str] = "sagemaker-batch"

    def _invoke(self, request: SpeechRequest) -> WholeAnswer | None:
        """Worker thread: the call, and its body read within the client's limit (None: over it)."""
        response = self._client.invoke_endpoint(
            EndpointName=self.target.endpoint_name, Body=invocation_body(request, stream=False),
            ContentType="application/json",
        )
        body = response["Body"]
        answer = WholeAnswer(request)
        try:
            for data in body.iter_chunks(CHUNK_BYTES):
                if not answer.feed(data):
                    return None
        finally:
            body.close()
        return answer

    async def _serve(self, request: SpeechRequest) -> None:
        try:
            answer = await asyncio.to_thread(self._invoke, request)
        except Exception as exc:
            self._fail_with(request, explain_botocore(exc, self.target.endpoint_name))
            return
        if self._is_cancelled(request.request_id):
            return
        if answer is None:
            self._too_much_audio(request)
            return
        self._answer(answer, None)


_END = object()


class SageMakerStreamTransport(_InvokeTransport):
    """InvokeEndpointWithResponseStream: audio as the container makes it, re-aligned to whole frames."""

    name: ClassVar[str] = "sagemaker-stream"

    def _pump(self, body: bytes, deliver: Any, stop: threading.Event) -> None:
        """Worker thread: the call, then each PayloadPart handed to the event loop as it is parsed."""
        try:
            response = self._client.invoke_endpoint_with_response_stream(
                EndpointName=self.target.endpoint_name, Body=body, ContentType="application/json"
            )
            deliver(response)
            stream = response["Body"]
            try:
                for event in stream:
                    if stop.is_set():
                        break
                    part = event.get("PayloadPart")
                    if part is not None:
                        deliver(bytes(part.get("Bytes", b"")))
                        continue
                    for kind in ("ModelStreamError", "InternalStreamFailure"):
                        if kind in event:  # botocore normally raises for these; handle the modelled form too
                            fault = event[kind]
                            deliver(Failure(kind, str(fault.get("Message", fault))))
                            return
            finally:
                stream.close()
        except Exception as exc:
            deliver(exc)
            return
        deliver(_END)

    async def _serve(self, request: SpeechRequest) -> None:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()

        def deliver(item: Any) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, item)

        pump = loop.run_in_executor(None, self._pump, invocation_body(request, stream=True), deliver, stop)
        rid = request.request_id
        aligner = aligner_for(request.format)
        budget = AudioBudget()
        started = False
        try:
            while True:
                item = await inbox.get()
                if self._is_cancelled(rid):
                    return  # the thread stops at its next part; the next request does not wait for it
                if isinstance(item, Exception):
                    self._fail_with(request, explain_botocore(item, self.target.endpoint_name))
                    return
                if isinstance(item, Failure):
                    self._fail_with(request, explain(item.code, item.message, self.target.endpoint_name))
                    return
                if item is _END:
                    left = aligner.flush()
                    if left:
                        log.warning("%s: %d trailing bytes did not form a whole frame", rid, left)
                    self._emit(AudioDone(rid, None))
                    return
                if isinstance(item, dict):  # the call's response headers: HTTP 200, audio follows
                    started = True
                    self._emit(AudioStart(rid, request.format, SAMPLE_RATE))
                    continue
                aligned = aligner.feed(item)
                if aligned and started:
                    if not budget.spend(request.format, aligned):
                        self._too_much_audio(request)
                        return  # the thread stops at its next part
                    self._emit(AudioChunk(rid, aligned))
        finally:
            stop.set()
            if not pump.done():
                pump.add_done_callback(lambda _: None)

