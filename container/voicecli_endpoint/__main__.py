"""`python -m voicecli_endpoint`: the container entrypoint (called with --host 0.0.0.0)."""

from __future__ import annotations

import argparse
from pathlib import Path

from voicecli.protocol import DEFAULTS
from voicecli_endpoint.engines.select import ENGINE_NAMES
from voicecli_endpoint.server import DEFAULT_HOST, DEFAULT_PORT, serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m voicecli_endpoint", description="Kokoro-82M TTS endpoint")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--engine", choices=ENGINE_NAMES, default="auto",
                        help="auto: torch on a CUDA GPU, else onnx")
    parser.add_argument("--threads", type=int, default=1, help="inference threads (default 1)")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="models directory (default: voicecli's, ~/.local/share/voicecli/models)")
    parser.add_argument("--max-text-chars", type=int, default=DEFAULTS.limits.max_text_chars,
                        help="longest accepted text per request")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, engine=args.engine, threads=args.threads, models_dir=args.models_dir,
          max_text_chars=args.max_text_chars, log_level=args.log_level)


if __name__ == "__main__":
    main()
