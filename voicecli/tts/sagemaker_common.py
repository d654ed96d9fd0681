"""What the three SageMaker transports share: where the endpoint is, whose credentials, and errors a person can act on.

Credentials are always resolved through boto3 (profile, environment, SSO, instance or container role), even for the
HTTP/2 SDK: that SDK's own resolver chain fails on instance roles, and one resolution path means one set of error
messages. AWS error codes are translated into advice here, once, so batch, response-stream and bidi say the same
thing about the same failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from voicecli.tts.base import TransportError

SAGEMAKER_INVOCATION_CEILING_S = 60.0
"""SageMaker cuts an invocation off after 60 s; reading longer than that only hides the failure."""


@dataclass(frozen=True)
class SageMakerTarget:
    """One SageMaker endpoint and how to reach it.

    `endpoint_url` overrides AWS's URL: tests point it at the local stand-ins, and it doubles as a "local SageMaker"
    development aid (run the container and a stand-in, point voicecli at it with dummy credentials).
    """

    endpoint_name: str
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    max_attempts: int = 3
    """botocore's total attempts for throttling and 5xx (1 = no retry); long retries hurt latency more than help."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None


def boto_session(target: SageMakerTarget) -> boto3.session.Session:
    try:
        return boto3.session.Session(profile_name=target.profile, region_name=target.region)
    except botocore.exceptions.ProfileNotFound as exc:
        raise TransportError(
            f"AWS profile {target.profile!r} is not configured ({exc}); run `aws configure --profile "
            f"{target.profile}` or drop --aws-profile"
        ) from exc


def resolve_region(session: boto3.session.Session, target: SageMakerTarget) -> str:
    region = target.region or session.region_name
    if not region:
        raise TransportError(
            "no AWS region for the SageMaker endpoint: pass --aws-region, set AWS_REGION, or set a region in your "
            "AWS profile"
        )
    return str(region)


def resolve_credentials(session: boto3.session.Session, target: SageMakerTarget) -> Credentials:
    """Frozen credentials from boto3's chain, or TransportError saying how to provide some."""
    try:
        found = session.get_credentials()
        frozen = None if found is None else found.get_frozen_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise TransportError(f"could not load AWS credentials ({exc}); check your AWS profile and SSO login") from exc
    if frozen is None or not frozen.access_key or not frozen.secret_key:
        where = f"profile {target.profile!r}" if target.profile else "the environment, ~/.aws or an instance role"
        raise TransportError(
            f"no AWS credentials found in {where} for SageMaker endpoint {target.endpoint_name!r}; run `aws configure` "
            "(or `aws sso login`), set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or use --endpoint local"
        )
    return Credentials(frozen.access_key, frozen.secret_key, frozen.token or None)


def runtime_client(target: SageMakerTarget) -> tuple[Any, Credentials]:
    """A boto3 `sagemaker-runtime` client (checked to have credentials) for InvokeEndpoint and its streaming twin."""
    session = boto_session(target)
    region = resolve_region(session, target)
    credentials = resolve_credentials(session, target)
    config = botocore.config.Config(
        retries={"mode": "standard", "total_max_attempts": max(1, target.max_attempts)},
        read_timeout=SAGEMAKER_INVOCATION_CEILING_S + 10,
        connect_timeout=10,
        tcp_keepalive=True,
    )
    client = session.client("sagemaker-runtime", region_name=region, endpoint_url=target.endpoint_url, config=config)
    return client, credentials


@dataclass(frozen=True)
class Failure:
    """A classified AWS failure: a short code for AudioFailed and advice for the person reading it.

    `fatal` means no later request can succeed either (no such endpoint, bad credentials): the transport stops
    accepting requests instead of failing each one the same way.
    """

    code: str
    message: str
    fatal: bool = False


_FATAL_CODES = frozenset(
    {"UnrecognizedClientException", "InvalidSignatureException", "AccessDeniedException", "ExpiredTokenException",
     "InvalidClientTokenId"}
)


def explain(code: str, message: str, endpoint_name: str) -> Failure:
    """Advice for an AWS error code (from an HTTP error or a mid-stream exception event)."""
    lowered = message.lower()
    if code in ("ValidationError", "ValidationException") and "not found" in lowered:
        return Failure(
            "endpoint_not_found",
            f"SageMaker endpoint {endpoint_name!r} was not found ({message}); check the name and the region "
            "(`aws sagemaker list-endpoints`), or deploy it with `container/build.sh` and the CDK app",
            fatal=True,
        )
    if code in _FATAL_CODES:
        return Failure(
            "aws_auth",
            f"AWS refused the credentials ({code}: {message}); refresh them (`aws sso login`) and check that they may "
            "call sagemaker:InvokeEndpoint",
            fatal=True,
        )
    if code in ("ThrottlingException", "Throttling", "TooManyRequestsException"):
        return Failure(
            "throttled",
            f"SageMaker throttled the request ({message}); wait a moment, or raise the endpoint's instance count",
        )
    if code == "ModelError":
        return Failure("model_error", f"the TTS container rejected the request: {message}")
    if code == "ModelNotReadyException":
        return Failure("not_ready", f"the endpoint is still starting ({message}); try again in a minute")
    if code == "ModelStreamError":
        return Failure(
            "model_stream_error",
            f"the TTS container failed mid-stream ({message}); the request's audio is incomplete, check the "
            "endpoint's CloudWatch logs",
        )
    if code == "InternalStreamFailure":
        return Failure(
            "internal_stream_failure",
            f"SageMaker's stream broke ({message}); the request's audio is incomplete, retrying usually works",
        )
    if code in ("InputValidationError", "ValidationError", "ValidationException"):
        return Failure("invalid_request", f"SageMaker rejected the request ({code}: {message})")
    if code in ("ServiceUnavailable", "ServiceUnavailableError", "InternalFailure", "InternalServerError"):
        return Failure("service_unavailable", f"SageMaker is unavailable ({code}: {message}); retry shortly")
    return Failure(code or "aws_error", f"SageMaker call failed ({code}: {message})")


def explain_botocore(exc: Exception, endpoint_name: str) -> Failure:
    """Classify what boto3 raised during InvokeEndpoint / InvokeEndpointWithResponseStream."""
    if isinstance(exc, botocore.exceptions.EventStreamError | botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = str(error.get("Message", "")) or str(exc)
        original = exc.response.get("OriginalMessage")
        if code == "ModelError" and original:
            message = f"{message} (container said: {str(original)[:300]})"
        return explain(code, message, endpoint_name)
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return Failure("aws_auth", "no AWS credentials; run `aws configure` or `aws sso login`", fatal=True)
    if isinstance(exc, botocore.exceptions.EndpointConnectionError | botocore.exceptions.ConnectionClosedError):
        return Failure("connection_lost", f"cannot reach SageMaker Runtime ({exc}); check the network and region")
    if isinstance(exc, botocore.exceptions.ReadTimeoutError):
        return Failure("timeout", f"SageMaker did not answer in time ({exc})")
    return Failure("aws_error", f"SageMaker call failed: {exc.__class__.__name__}: {exc}")
