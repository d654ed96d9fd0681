"""Running the endpoint app under uvicorn: what `voicecli serve` and the container entrypoint call."""

from __future__ import annotations

import logging

from voicecli.logs import configure_logging, installed_handlers
from voicecli.wire.protocol import is_loopback_host
from voicecli.wire.server_options import DEFAULT_HOST, TOKEN_ENV, ServerOptions
from voicecli_endpoint import log_redaction
from voicecli_endpoint.app import ServerSettings, create_app
from voicecli_endpoint.connections import uvicorn_options

__all__ = ["exposure_warning", "serve"]


def exposure_warning(host: str, token: str) -> str | None:
    """The warning to log when the server is reachable beyond this machine and anyone reaching it may use it."""
    if token or is_loopback_host(host):
        return None
    return (f"bound to {host}, beyond loopback, with NO bearer token: anyone who can reach this port can use the "
            f"endpoint. Set a token ({TOKEN_ENV}) or bind to {DEFAULT_HOST} (fine behind SageMaker, which "
            "authenticates callers itself)")


class _DenialIsNotAnError(logging.Filter):
    """Drops uvicorn's "ASGI callable returned without completing handshake." ERROR line.

    Why: uvicorn's websockets-sansio protocol logs it after every handshake the app refuses with an HTTP denial
    response (401, 403, 503), although the refusal completed as the ASGI spec intends. The app logs each refusal
    itself, with its reason; an ERROR line per refused client would bury real errors and alarm operators.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


def serve(options: ServerOptions) -> None:
    """Serve with `options` until interrupted (both commands parse theirs into one: voicecli.wire.server_options)."""
    import uvicorn

    configure_logging(options.log_level, options.log_file)
    settings = ServerSettings.from_options(options)
    limits, required, host = settings.limits, settings.token, settings.host
    log = logging.getLogger(__name__)
    warning = exposure_warning(host, required)
    if warning is not None:
        log.warning(warning)
    log.info(
        "serving on %s:%d; bearer token %s; limits: %d sessions, %d queued requests per session, idle timeout %s",
        host, options.port, "required" if required else "not required", limits.max_sessions,
        limits.max_queued_requests, f"{limits.idle_timeout_s:g} s" if limits.idle_timeout_s > 0 else "off")
    app = create_app(settings)
    # WebSocket messages up to 16x the protocol limit reach the app, so an oversized frame gets an error frame
    # instead of a closed connection; beyond that uvicorn closes with 1009 (message too big). Slow or silent clients
    # are bounded by connections.uvicorn_options (request head deadline, keep-alive, WebSocket pings).
    config = uvicorn.Config(
        app,
        host=host,
        port=options.port,
        log_level=options.log_level.lower(),
        ws_max_size=max(limits.max_frame_bytes * 16, 1 << 20),
        timeout_graceful_shutdown=5,
        **uvicorn_options(),
    )
    if options.log_file is not None:  # uvicorn gave its own loggers stderr handlers: send them to the file too
        for name in ("uvicorn", "uvicorn.access"):
            logging.getLogger(name).handlers = installed_handlers()
    log_redaction.install(log_redaction.known_secrets(required))  # after uvicorn made its handlers
    logging.getLogger("uvicorn.error").addFilter(_DenialIsNotAnError())
    uvicorn.Server(config).run()
