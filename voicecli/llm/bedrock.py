"""Amazon Bedrock ConverseStream backend, through boto3's `bedrock-runtime` client.

boto3 is synchronous, so each answer is read in a thread (see `threaded`). Retries are off by default: a voice
conversation is better served by an immediate, explained "throttled" than by a silent multi-second backoff.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from contextlib import aclosing, suppress
from typing import Any

import boto3
import botocore.exceptions as bx
from botocore.config import Config

from voicecli.config import LlmBedrockSettings
from voicecli.llm.base import (
    END_TURN,
    ChatMessage,
    LLMAccessDenied,
    LLMError,
    LLMModelUnavailable,
    LLMStreamError,
    LLMThrottled,
    LLMUnavailable,
    StreamEnd,
    StreamEvent,
    TextDelta,
)
from voicecli.llm.threaded import Emit, ThreadedStreams

_CREDENTIALS_TODO = (
    "configure credentials with `aws configure` (or `aws sso login`), set AWS_PROFILE or llm.bedrock.profile, "
    "or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
)
_BAD_CREDENTIAL_CODES = {
    "unrecognizedclient",
    "invalidsignature",
    "signaturedoesnotmatch",
    "expiredtoken",
    "invalidclienttokenid",
}


def _short_code(code: str) -> str:
    """'ThrottlingException' (HTTP) and 'throttlingException' (event stream) -> 'throttling'."""
    return code.lower().removesuffix("exception")


def map_client_error(code: str, message: str, *, settings: LlmBedrockSettings, mid_stream: bool) -> LLMError:
    """Translate a Bedrock error code into an LLMError that tells the user what to do."""
    short = _short_code(code)
    model, region = settings.model_id, settings.region
    said = f"({code}: {message})" if message else f"({code})"
    if short in {"throttling", "toomanyrequests"}:
        return LLMThrottled(
            f"Bedrock is throttling requests {said}",
            f"wait a few seconds and retry, or request a higher quota for {model} in {region} (Service Quotas)",
        )
    if short in _BAD_CREDENTIAL_CODES:
        return LLMAccessDenied(f"AWS rejected the credentials {said}", _CREDENTIALS_TODO)
    if short == "accessdenied":
        return LLMAccessDenied(
            f"Bedrock denied access to model {model} {said}",
            f"enable the model under 'Model access' in the Bedrock console for {region}, and allow "
            "bedrock:InvokeModelWithResponseStream for it in your IAM policy",
        )
    if mid_stream:
        return LLMStreamError(
            f"Bedrock's answer stream failed part-way {said}",
            "retry the question; if it keeps happening, try another model or region",
        )
    if short == "resourcenotfound" or (short == "validation" and "model" in message.lower()):
        return LLMModelUnavailable(
            f"Bedrock cannot use model {model!r} in {region} {said}",
            "check llm.bedrock.model_id (some models need an inference-profile id such as 'us.<model id>') "
            f"and that the model is enabled for your account in {region}",
        )
    if short == "validation":
        return LLMError(
            f"Bedrock rejected the request {said}",
            "check llm.max_tokens and llm.temperature against the model's limits",
        )
    if short in {"serviceunavailable", "internalserver", "modelnotready", "modeltimeout"}:
        return LLMUnavailable(f"Bedrock could not serve model {model} right now {said}", "retry in a few seconds")
    return LLMError(f"Bedrock request failed {said}", "retry; if it persists, check the model id and region")


def map_exception(exc: Exception, *, settings: LlmBedrockSettings, endpoint: str, mid_stream: bool) -> LLMError:
    """Translate anything boto3/botocore/urllib3 raises into an actionable LLMError."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, bx.ClientError):
        err = exc.response.get("Error", {})
        return map_client_error(
            str(err.get("Code", "Unknown")),
            str(err.get("Message", "")),
            settings=settings,
            mid_stream=mid_stream or isinstance(exc, bx.EventStreamError),
        )
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError | bx.CredentialRetrievalError):
        return LLMAccessDenied(f"no usable AWS credentials ({exc})", _CREDENTIALS_TODO)
    if isinstance(exc, bx.SSOError | bx.TokenRetrievalError | bx.UnauthorizedSSOTokenError):
        return LLMAccessDenied(f"AWS SSO login is missing or expired ({exc})", "run `aws sso login`")
    if isinstance(exc, bx.ProfileNotFound):
        return LLMAccessDenied(
            f"AWS profile {settings.profile!r} does not exist ({exc})",
            "fix llm.bedrock.profile or add the profile with `aws configure --profile NAME`",
        )
    if isinstance(exc, bx.NoRegionError):
        return LLMError("no AWS region is configured", "set llm.bedrock.region (or AWS_REGION)")
    if mid_stream:
        return LLMStreamError(
            f"the connection to Bedrock broke during the answer ({type(exc).__name__}: {exc})",
            "check your network connection and retry",
        )
    if isinstance(exc, bx.EndpointConnectionError):
        return LLMUnavailable(
            f"cannot reach Bedrock at {endpoint} ({exc})",
            "check your network connection and llm.bedrock.region (or endpoint_url)",
        )
    if isinstance(exc, bx.ReadTimeoutError | bx.ConnectionClosedError):
        return LLMUnavailable(
            f"Bedrock at {endpoint} did not answer ({type(exc).__name__}: {exc})",
            "check your network connection and retry",
        )
    return LLMError(f"Bedrock request failed ({type(exc).__name__}: {exc})", "retry; see the log for details")


def build_request(
    model_id: str, messages: list[ChatMessage], system: str, max_tokens: int, temperature: float
) -> dict[str, Any]:
    """The ConverseStream parameters for one answer."""
    request: dict[str, Any] = {
        "modelId": model_id,
        "messages": [{"role": m.role, "content": [{"text": m.content}]} for m in messages],
        "inferenceConfig": {"maxTokens": max_tokens, "temperature": temperature},
    }
    if system:
        request["system"] = [{"text": system}]
    return request


class _ConverseCall:
    """One ConverseStream request, read to the end in a worker thread."""

    def __init__(self, client: Any, request: dict[str, Any], settings: LlmBedrockSettings) -> None:
        self._client = client
        self._request = request
        self._settings = settings
        self._stream: Any = None

    def _map(self, exc: Exception, *, mid_stream: bool) -> LLMError:
        endpoint = str(self._client.meta.endpoint_url)
        return map_exception(exc, settings=self._settings, endpoint=endpoint, mid_stream=mid_stream)

    def run(self, emit: Emit, stop: threading.Event) -> None:
        try:
            response = self._client.converse_stream(**self._request)
        except Exception as exc:
            if stop.is_set():
                return
            raise self._map(exc, mid_stream=False) from exc
        stream = response["stream"]
        self._stream = stream
        stop_reason: str | None = None
        usage: dict[str, Any] = {}
        try:
            if stop.is_set():
                return
            for event in stream:
                if stop.is_set():
                    return
                if "contentBlockDelta" in event:
                    text = event["contentBlockDelta"].get("delta", {}).get("text")
                    if text:
                        emit(TextDelta(text))
                elif "messageStop" in event:
                    stop_reason = str(event["messageStop"].get("stopReason", END_TURN))
                elif "metadata" in event:
                    usage = event["metadata"].get("usage", {})
        except Exception as exc:
            if stop.is_set():
                return
            raise self._map(exc, mid_stream=True) from exc
        finally:
            stream.close()
        if stop_reason is None:
            raise LLMStreamError(
                "Bedrock's answer stream ended before its messageStop event",
                "retry the question; check your network connection if it recurs",
            )
        emit(StreamEnd(stop_reason, usage.get("inputTokens"), usage.get("outputTokens")))

    def interrupt(self) -> None:
        # urllib3's HTTPResponse.shutdown() does SHUT_RD on the socket: it wakes the worker's blocked read
        # without taking the buffered reader's lock, which close() from this thread would wait for.
        stream = self._stream
        raw = getattr(stream, "_raw_stream", None)
        if raw is not None:
            with suppress(Exception):  # already closed or released: the worker exits on its own
                raw.shutdown()


class BedrockLLM:
    """Streams answers from a Bedrock model with the ConverseStream API."""

    def __init__(
        self,
        settings: LlmBedrockSettings,
        *,
        max_attempts: int = 1,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
    ) -> None:
        """`settings` is the [llm.bedrock] section as loaded. The keywords are tuning the config does not expose:
        `max_attempts` 1 means no retries, so throttling is reported at once (tests raise it to see a retry)."""
        self.settings = settings
        config = Config(
            retries={"total_max_attempts": max(1, max_attempts), "mode": "standard"},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
        )
        try:
            session = boto3.Session(profile_name=settings.profile or None, region_name=settings.region or None)
            self._client: Any = session.client(
                "bedrock-runtime", endpoint_url=settings.endpoint_url or None, config=config
            )
        except Exception as exc:
            raise map_exception(exc, settings=settings, endpoint=settings.endpoint_url, mid_stream=False) from exc
        self._streams = ThreadedStreams("bedrock-converse-stream")

    async def stream(
        self, messages: list[ChatMessage], *, system: str, max_tokens: int, temperature: float
    ) -> AsyncGenerator[StreamEvent, None]:
        request = build_request(self.settings.model_id, messages, system, max_tokens, temperature)
        call = _ConverseCall(self._client, request, self.settings)
        async with aclosing(self._streams.stream(call)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        await self._streams.join(timeout_s=5.0)
        self._client.close()
