"""Running the endpoint app under uvicorn: what `voicecli serve` and the container entrypoint call."""

from __future__ import annotations

import logging
from pathlib import Path

from voicecli.protocol import DEFAULTS, Limits
from voicecli_endpoint.app import EndpointSettings, create_app

DEFAULT_HOST = "127.0.0.1"
"""Loopback by default: a local endpoint stays off the network. The container passes 0.0.0.0."""
DEFAULT_PORT = 8080
"""The SageMaker container contract's port."""


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    engine: str = "auto",
    threads: int = 1,
    models_dir: Path | None = None,
    max_text_chars: int = DEFAULTS.limits.max_text_chars,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. `models_dir` None means voicecli's default models directory."""
    import uvicorn

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limits = Limits(max_text_chars=max_text_chars)
    settings = EndpointSettings(engine=engine, models_dir=models_dir, threads=threads, limits=limits)
    app = create_app(settings)
    # WebSocket messages up to 16x the protocol limit reach the app, so an oversized frame gets an error frame
    # instead of a closed connection; beyond that uvicorn closes with 1009 (message too big).
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        ws_max_size=max(limits.max_frame_bytes * 16, 1 << 20),
        timeout_graceful_shutdown=5,
    )
