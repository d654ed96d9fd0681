"""SageMaker InvokeEndpointWithBidirectionalStream: the WebSocket design, through SageMaker's HTTP/2 API.

ONE HTTP/2 stream per chat session, reused for every sentence of every turn, exactly like `WebSocketTransport`:
SageMaker opens one WebSocket to the container per stream, forwards each RequestPayloadPart as one container
frame and each container frame back as one PayloadPart. The PayloadParts lose the WebSocket frame type, so frames
are told apart by their bytes (`classify_frame`). Requests are pipelined; the container answers in order.

Why these choices:
- The SDK (`aws-sdk-sagemaker-runtime-http2`, pre-alpha, pinned 0.12.0) only streams both ways over HTTP/2, which
  its CRT transport speaks only over TLS, so the CRT transport is passed explicitly (the default is HTTP/1.1).
- Credentials come from boto3 (see `sagemaker_common`) and are handed to the SDK explicitly: its own resolver
  chain fails on instance roles.
- Cancel and close are the protocol's own messages on the same stream. The input half is closed only after the
  container has closed the session: closing it right after sending tears the session down before the audio comes.
- If the stream ends while requests are outstanding (SageMaker ended the session, the container restarted), a new
  stream is opened and the unfinished requests re-sent (`receiver.Reconnects`, shared with the WebSocket transport,
  with its budget of reconnects within a time window); synthesis is deterministic, so the bytes already played
  are skipped and nothing is heard twice. A ModelStreamError fails the outstanding requests instead (re-sending
  what made the container fail would fail again) and the next request opens a new stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any, ClassVar

from voicecli.tts.base import (
    SpeechRequest,
    TransportError,
    TTSTransport,
)
from voicecli.tts.receiver import Receiver, Reconnects, Send
from voicecli.tts.sagemaker_common import (
    Failure,
    SageMakerTarget,
    boto_session,
    explain,
    resolve_credentials,
    resolve_region,
)
from voicecli.wire.protocol import (
    Cancel,
    Close,
    encode_message,
)

log = logging.getLogger(__name__)

BIDI_PORT = 8443
"""SageMaker Runtime serves the HTTP/2 bidirectional API on its own port."""


def default_bidi_url(region: str) -> str:
    return f"https://runtime.sagemaker.{region}.amazonaws.com:{BIDI_PORT}"


class _StreamEnded(Exception):
    """The HTTP/2 stream ended (or broke) without our close."""


def sdk_failure(exc: Exception, endpoint_name: str) -> Failure:
    """Advice for what the HTTP/2 SDK raised. Unmodelled AWS errors only carry their code inside the message."""
    from smithy_core.exceptions import CallError

    code = exc.__class__.__name__
    message = str(getattr(exc, "message", "") or exc)
    if isinstance(exc, CallError) and code == "CallError":
        found = re.search(r"id: (\S+)", message)
        status = re.search(r"status: (\d+)", message)
        code = found.group(1).split("#")[-1] if found else "CallError"
        if found is not None:  # the SDK drops an unmodelled error's message: say what is known, plainly
            message = f"HTTP {status.group(1) if status else '?'} {code}"
        if code in ("ValidationError", "ValidationException", "ResourceNotFound"):
            return Failure(
                "endpoint_not_found",
                f"SageMaker refused to open a bidirectional stream to {endpoint_name!r} ({message}): the endpoint "
                "was not found or does not support bidirectional streaming; check the name and region "
                "(`aws sagemaker list-endpoints`) and that its container declares "
                "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true",
                fatal=True,
            )
        if code == "CallError" and getattr(exc, "is_throttling_error", False):
            code = "ThrottlingException"
    error_code = getattr(exc, "error_code", None)
    if error_code:
        message = f"{message} [{error_code}]"
    if code == "InputValidationError" and "not found" in message.lower():
        code = "ValidationError"
    return explain(code, message, endpoint_name)


class SageMakerBidiTransport(TTSTransport):
    name: ClassVar[str] = "sagemaker-bidi"
    persistent: ClassVar[bool] = True

    def __init__(
        self,
        target: SageMakerTarget,
        *,
        connect_timeout_s: float = 15.0,
        close_timeout_s: float = 10.0,
        reconnect_attempts: int = 3,
        reconnect_base_delay_s: float = 0.2,
        reconnect_window_s: float = 60.0,
        target_variant: str | None = None,
    ) -> None:
        """`reconnect_attempts` is the budget of new streams within any `reconnect_window_s` seconds for requests left
        unfinished (see `receiver.Reconnects`); the first waits `reconnect_base_delay_s`, each next one twice as
        long."""
        super().__init__()
        self.target = target
        self._connect_timeout_s = connect_timeout_s
        self._close_timeout_s = close_timeout_s
        self._target_variant = target_variant
        self._client: Any = None
        self._stream: Any = None
        self._output: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._receiver = Receiver(self._emit)
        self._reconnects = Reconnects(self._receiver, f"the SageMaker endpoint {target.endpoint_name!r}",
                                      reconnect_attempts, reconnect_window_s, reconnect_base_delay_s)
        self._send_lock = asyncio.Lock()
        self._closing = False
        self._broken: str | None = None
        self.streams_opened = 0
        """How many HTTP/2 streams this session opened (1 while all is well; counted in tests)."""

    # ------------------------------------------------------------------------------------------------ lifecycle

    async def connect(self) -> None:
        """Resolve credentials, build the SDK client, open the stream and wait for SageMaker's response headers."""
        self._client = await self._build_client()
        await self._open_stream()

    async def _build_client(self) -> Any:
        from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client
        from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config
        from smithy_http.aio.crt import AWSCRTHTTPClient

        def resolve() -> tuple[str, Any]:
            session = boto_session(self.target)
            return resolve_region(session, self.target), resolve_credentials(session, self.target)

        region, credentials = await asyncio.to_thread(resolve)
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
            endpoint_uri=self.target.endpoint_url or default_bidi_url(region),
            region=region,
            aws_access_key_id=credentials.access_key,
            aws_secret_access_key=credentials.secret_key,
            aws_session_token=credentials.token,
            transport=AWSCRTHTTPClient(),
            max_attempts=1,
        )
        return AsyncSageMakerRuntimeHTTP2Client(config=config)

    async def _open_stream(self) -> None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            InvokeEndpointWithBidirectionalStreamInput,
        )

        request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=self.target.endpoint_name, target_variant=self._target_variant
        )
        stream: Any = None
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                stream = await self._client.invoke_endpoint_with_bidirectional_stream(request)
                _, output = await stream.await_output()
        except TimeoutError as exc:
            raise TransportError(
                f"SageMaker did not open a bidirectional stream to {self.target.endpoint_name!r} within "
                f"{self._connect_timeout_s:.0f} s; check the network, region and endpoint status"
            ) from exc
        except Exception as exc:
            if stream is not None:  # stop the SDK's body writer on the refused stream
                with contextlib.suppress(Exception):
                    await stream.input_stream.close()
            failure = sdk_failure(exc, self.target.endpoint_name)
            if "certificate" in str(exc).lower() or "tls" in str(exc).lower():
                failure = Failure("tls", f"TLS failed talking to {self.target.endpoint_url or 'SageMaker'}: {exc}; "
                                  "for a local stand-in, point SSL_CERT_FILE at its certificate", fatal=True)
            raise TransportError(failure.message) from exc
        self._stream, self._output = stream, output
        self.streams_opened += 1
        self._reader = asyncio.create_task(self._read_loop(output), name="tts-sagemaker-bidi-reader")

    async def send(self, request: SpeechRequest) -> None:
        if self._broken is not None:
            raise TransportError(self._broken)
        if self._client is None:
            raise TransportError("the TTS transport is not connected: call connect() first")
        async with self._send_lock:
            if self._stream is None:  # the last stream failed: a new request gets a new one, after what is unfinished
                await self._open_stream()
                await self._receiver.resend(self._send_part)
            await self._send_part(self._receiver.sent(request))

    async def cancel(self, request_id: str | None = None) -> None:
        self._receiver.forget(request_id)
        await self._cancel_at_container(request_id)

    async def _cancel_at_container(self, request_id: str | None) -> None:
        """The protocol's cancel on the stream (also for a request the Receiver refused: the container stops working
        on it, and the session goes on)."""
        if self._stream is not None:
            async with self._send_lock:
                await self._send_or_drop(encode_message(Cancel(request_id)))

    async def aclose(self) -> None:
        """Send the protocol's close, let the container finish what is outstanding, then close the input half."""
        self._closing = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reconnecting
        if self._stream is not None:
            with contextlib.suppress(Exception):
                async with self._send_lock:
                    await self._send_part(encode_message(Close()))
        # Close the input half only once nothing is outstanding (closing earlier tears the session down), and
        # before SageMaker ends the response (closing after it makes CRT's body writer fail on a completed stream).
        deadline = asyncio.get_running_loop().time() + self._close_timeout_s
        while self._receiver.outstanding and self._stream is not None and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        await self._drop_stream()
        if self._reader is not None:
            try:
                remaining = max(0.5, deadline - asyncio.get_running_loop().time())
                await asyncio.wait_for(asyncio.shield(self._reader), remaining)
            except (TimeoutError, Exception):
                self._reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._reader
        if self._client is not None:
            with contextlib.suppress(Exception):
                transport = getattr(self._client._config, "transport", None)
                await self._client.close()
                if transport is not None:
                    await transport.close()
            self._client = None

    @property
    def outstanding(self) -> list[str]:
        return self._receiver.outstanding

    # ------------------------------------------------------------------------------------------------ wire

    async def _send_part(self, text: str) -> None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            RequestPayloadPart,
            RequestStreamEventPayloadPart,
        )

        part = RequestPayloadPart(bytes_=text.encode("utf-8"))  # BINARY, as SageMaker's own clients send
        await self._stream.input_stream.send(RequestStreamEventPayloadPart(value=part))

    async def _send_or_drop(self, text: str) -> None:
        """Send on the current stream; if it has broken, its reader re-opens it and re-sends what is unfinished."""
        with contextlib.suppress(Exception):
            await self._send_part(text)

    async def _drop_stream(self) -> None:
        stream, self._stream, self._output = self._stream, None, None
        if stream is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(stream.input_stream.close(), 2.0)

    async def _read_loop(self, output: Any) -> None:
        from aws_sdk_sagemaker_runtime_http2.models import (
            ResponseStreamEventPayloadPart,
        )

        try:
            while True:
                event = await output.receive()
                if event is None:
                    break
                if isinstance(event, ResponseStreamEventPayloadPart):
                    for refused in self._receiver.handle(event.value.bytes_ or b""):
                        await self._cancel_at_container(refused)
                else:  # ModelStreamError / InternalStreamFailure delivered as events rather than raised
                    raise _fault_of(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._closing:
                return
            failure = sdk_failure(exc, self.target.endpoint_name)
            log.warning("SageMaker bidi stream failed: %s", failure.message)
            self._fail_outstanding(failure)
            await self._drop_stream()
            return
        if self._closing:
            return
        # The stream ended without our close: re-open and re-send what was not finished.
        await self._drop_stream()
        if self._receiver.outstanding:
            self._reconnecting = asyncio.create_task(self._reconnect(), name="tts-sagemaker-bidi-reconnect")

    async def _reconnect(self) -> None:
        await self._reconnects.run(self._reopen, self._send_lock, "SageMaker ended the stream")

    async def _reopen(self) -> Send | None:
        if self._stream is not None:
            return None  # a send opened one meanwhile, and re-sent what was unfinished
        await self._open_stream()
        return self._send_or_drop

    def _fail_outstanding(self, failure: Failure) -> None:
        self._receiver.fail_all(failure.code, failure.message)
        if failure.fatal:
            self._broken = failure.message


def _fault_of(event: Any) -> Exception:
    value = getattr(event, "value", None)
    if isinstance(value, Exception):
        return value
    return RuntimeError(f"unexpected event from SageMaker: {event!r}")
