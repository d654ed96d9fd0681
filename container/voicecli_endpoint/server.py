"""Running the endpoint app under uvicorn: what `voicecli serve` and the container entrypoint call."""

from __future__ import annotations

import logging
from pathlib import Path

from voicecli.logs import configure_logging, installed_handlers
from voicecli.wire.protocol import DEFAULTS, Limits, is_loopback_host
from voicecli.wire.server_options import BATCH_WINDOW_MS, DEFAULT_HOST, DEFAULT_PORT, TOKEN_ENV
from voicecli_endpoint import log_redaction
from voicecli_endpoint.access import token_from_environment
from voicecli_endpoint.app import EndpointSettings, create_app
from voicecli_endpoint.connections import uvicorn_options

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "exposure_warning", "serve"]


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


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    engine: str = "auto",
    workers: int | None = None,
    threads: int | None = None,
    models_dir: Path | None = None,
    max_text_chars: int = DEFAULTS.limits.max_text_chars,
    log_level: str = "info",
    token: str | None = None,
    max_queued_requests: int = DEFAULTS.limits.max_queued_requests,
    max_sessions: int = DEFAULTS.limits.max_sessions,
    idle_timeout_s: float = DEFAULTS.limits.idle_timeout_s,
    max_batch: int | None = None,
    batch_window_ms: float = BATCH_WINDOW_MS,
    log_file: Path | None = None,
) -> None:
    """Serve until interrupted. `models_dir` None means voicecli's default models directory.

    The parameters are voicecli.wire.server_options.ServerOptions' fields. `workers`/`threads`/`max_batch` None means
    `auto` (voicecli_endpoint.sizing). `token` None reads the environment (VOICECLI_ENDPOINT__TOKEN); "" means no
    token is required. `log_file` None logs to standard error.
    """
    import uvicorn

    configure_logging(log_level, log_file)
    limits = Limits(max_text_chars=max_text_chars, max_queued_requests=max_queued_requests,
                    max_sessions=max_sessions, idle_timeout_s=idle_timeout_s)
    required = token_from_environment() if token is None else token.strip()
    settings = EndpointSettings(engine=engine, models_dir=models_dir, workers=workers, threads=threads,
                                max_batch=max_batch, batch_window_ms=batch_window_ms, limits=limits, token=required,
                                host=host)
    log = logging.getLogger(__name__)
    warning = exposure_warning(host, required)
    if warning is not None:
        log.warning(warning)
    log.info(
        "serving on %s:%d; bearer token %s; limits: %d sessions, %d queued requests per session, idle timeout %s",
        host, port, "required" if required else "not required", max_sessions, max_queued_requests,
        f"{idle_timeout_s:g} s" if idle_timeout_s > 0 else "off")
    app = create_app(settings)
    # WebSocket messages up to 16x the protocol limit reach the app, so an oversized frame gets an error frame
    # instead of a closed connection; beyond that uvicorn closes with 1009 (message too big). Slow or silent clients
    # are bounded by connections.uvicorn_options (request head deadline, keep-alive, WebSocket pings).
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        ws_max_size=max(limits.max_frame_bytes * 16, 1 << 20),
        timeout_graceful_shutdown=5,
        **uvicorn_options(),
    )
    if log_file is not None:  # uvicorn gave its own loggers stderr handlers: send them to the file too
        for name in ("uvicorn", "uvicorn.access"):
            logging.getLogger(name).handlers = installed_handlers()
    log_redaction.install(log_redaction.known_secrets(required))  # after uvicorn made its handlers
    logging.getLogger("uvicorn.error").addFilter(_DenialIsNotAnError())
    uvicorn.Server(config).run()
