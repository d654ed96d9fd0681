"""Who may use the endpoint: the optional bearer token and the refusal responses (see voicecli.wire.protocol).

Why a token at all: SageMaker authenticates callers with IAM before a request reaches the container, but a
self-hosted endpoint (``voicecli serve --host 0.0.0.0`` on a GPU box) has nothing in front of it. The check
uses ``hmac.compare_digest`` so the time it takes does not reveal how much of a guess was right, and the token
itself is never logged or echoed.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping

from starlette.responses import JSONResponse

from voicecli.wire.protocol import ErrorCode, is_loopback_host
from voicecli.wire.server_options import TOKEN_ENV
from voicecli_endpoint.validation import origin_is_loopback, shown

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


def host_name(host: str) -> str:
    """The name part of a Host header (``localhost:8080`` -> ``localhost``, ``[::1]:8080`` -> ``::1``), lowercased,
    without a trailing dot. A bare IPv6 address without brackets is not a valid Host and yields a name no check
    accepts."""
    value = host.strip()
    name = value[1:].partition("]")[0] if value.startswith("[") else value.partition(":")[0]
    return name.rstrip(".").lower()


def binds_every_address(bind_host: str) -> bool:
    """Whether `bind_host` (serve's --host) is a wildcard (0.0.0.0, ::, or empty): the server answers on every
    interface, by whatever name or address each client uses."""
    name = bind_host.strip().strip("[]")
    if not name:
        return True
    try:
        return ipaddress.ip_address(name).is_unspecified
    except ValueError:
        return False


def host_allowed(host: str | None, token: str, bind_host: str) -> bool:
    """DNS-rebinding guard: a token-less endpoint bound to one address serves only requests addressed to a loopback
    name (localhost, 127.0.0.1, [::1], any port) or to the address it is bound to.

    Why: a web page can make its own domain resolve to 127.0.0.1 and then read the local endpoint as if it were
    its own site: same origin, so no Origin header on a GET and nothing to refuse, yet /stats and /ping?details=1
    would be read. The Host header still names the page's domain, which no client of this machine uses.

    Always allowed:
    * with a token: the token is the guard, and SageMaker or a reverse proxy in front sends its own Host;
    * no Host (HTTP/1.0): a program, never a browser;
    * a server bound to every interface (``--host 0.0.0.0``): that is how the container runs behind SageMaker,
      with no token (entrypoint.sh; SageMaker authenticates callers itself) and a Host of SageMaker's choosing on
      ``/ping``, ``/invocations`` and the stream alike, so a check there would fail the health check and every
      call. Such a server is open to anyone who reaches it anyway (it logs a WARNING at start without a token).

    ``/ping`` gets no exemption of its own: on a loopback server it is what a rebinding page would read, and every
    health check of a local server (Docker's HEALTHCHECK, voicecli's client) addresses it by a loopback name.
    """
    if token or host is None or binds_every_address(bind_host):
        return True
    name = host_name(host)
    return is_loopback_host(name) or name == bind_host.strip().strip("[]").rstrip(".").lower()


def forbidden_host_response(host: str) -> JSONResponse:
    """403 for a request addressed to a name that is not this machine's (see host_allowed).

    The code is forbidden_origin: the request comes from a web page of another site, reaching the server under
    that site's name, which is what the code tells a client.
    """
    return JSONResponse(
        {"code": str(ErrorCode.FORBIDDEN_ORIGIN),
         "message": f"requests addressed to the host {shown(host)} are refused: this endpoint has no token, so it "
                    "serves only requests to a loopback name (localhost, 127.0.0.1, [::1]) or to the address it is "
                    f"bound to; start it with a token ({TOKEN_ENV}) to serve others"},
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
