"""Who may use the endpoint: the optional bearer token and the refusal responses (see voicecli.wire.protocol).

Why a token at all: SageMaker authenticates callers with IAM before a request reaches the container, but a
self-hosted endpoint (``voicecli serve --host 0.0.0.0`` on a GPU box) has nothing in front of it. The check
uses ``hmac.compare_digest`` so the time it takes does not reveal how much of a guess was right, and the token
itself is never logged or echoed.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping

from starlette.responses import JSONResponse

from voicecli.wire.protocol import ErrorCode, shown
from voicecli.wire.server_options import TOKEN_ENV
from voicecli_endpoint.validation import origin_is_loopback

UNAUTHORIZED_MESSAGE = (
    "this endpoint requires a bearer token: set endpoint.token (or the environment variable "
    f"{TOKEN_ENV}) to the token the server was started with"
)


def token_from_environment(environ: Mapping[str, str] | None = None) -> str:
    """The token the server should require, or "" for none."""
    return (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()


def bearer_matches(authorization: str | None, token: str) -> bool:
    """True when no token is required, or `authorization` is "Bearer <token>" (constant-time comparison)."""
    if not token:
        return True
    if authorization is None:
        return False
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode("utf-8"), token.encode("utf-8"))


def unauthorized_response() -> JSONResponse:
    """401 with the protocol's error body and the challenge header HTTP asks for."""
    return JSONResponse({"code": str(ErrorCode.UNAUTHORIZED), "message": UNAUTHORIZED_MESSAGE}, status_code=401,
                        headers={"WWW-Authenticate": 'Bearer realm="voicecli"'})


def origin_allowed(origin: str | None, token: str) -> bool:
    """Browser safety: a token-less endpoint serves only requests with no Origin or a loopback Origin.

    Why: browsers let any web page open a WebSocket or send a POST to 127.0.0.1; only the Origin header tells
    such a request from one of the user's own programs. With a token the token is the guard (a page cannot
    know it), so the Origin is not checked.
    """
    return bool(token) or origin is None or origin_is_loopback(origin)


def forbidden_origin_response(origin: str) -> JSONResponse:
    return JSONResponse(
        {"code": str(ErrorCode.FORBIDDEN_ORIGIN),
         "message": f"requests from the web page at {shown(origin)} are refused: this endpoint has no token, so it "
                    "serves only programs on this machine (no Origin) and pages from a loopback address; "
                    f"start it with a token ({TOKEN_ENV}) to serve others"},
        status_code=403,
    )


RETRY_AFTER_S = 5
"""What a refused client is told to wait (HTTP Retry-After) before trying again."""


def too_many_sessions_response(limit: int) -> JSONResponse:
    """503 for a WebSocket handshake or POST that finds the concurrency budget (see admission.py) full."""
    return JSONResponse(
        {"code": str(ErrorCode.TOO_MANY_SESSIONS),
         "message": f"the endpoint already serves {limit} sessions and requests, its limit; try again later"},
        status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)},
    )
