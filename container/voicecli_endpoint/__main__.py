"""`python -m voicecli_endpoint`: the container entrypoint (called with --host 0.0.0.0)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from voicecli.protocol import DEFAULTS
from voicecli_endpoint.access import TOKEN_ENV
from voicecli_endpoint.engines.select import ENGINE_NAMES
from voicecli_endpoint.server import DEFAULT_HOST, DEFAULT_PORT, serve
from voicecli_endpoint.sizing import BATCH_WINDOW_MS, GPU_MAX_BATCH, parse_count


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _auto_or_count(what: str) -> Callable[[str], int | None]:
    """An argparse type for `--workers`/`--threads`: "auto" (None) or a whole number >= 1."""

    def parse(text: str) -> int | None:
        try:
            return parse_count(text, what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def main(argv: list[str] | None = None) -> None:
    limits = DEFAULTS.limits
    parser = argparse.ArgumentParser(prog="python -m voicecli_endpoint", description="Kokoro-82M TTS endpoint")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--engine", choices=ENGINE_NAMES, default="auto",
                        help="auto: torch on a CUDA GPU, else onnx")
    parser.add_argument("--workers", type=_auto_or_count("--workers"), default=None, metavar="N|auto",
                        help="parallel inferences (default auto: one per usable core on a CPU, one on a GPU)")
    parser.add_argument("--threads", type=_auto_or_count("--threads"), default=None, metavar="N|auto",
                        help="intra-op threads per inference (default auto: usable cores / workers)")
    parser.add_argument("--max-batch", type=_auto_or_count("--max-batch"), default=None, metavar="N|auto",
                        help=f"pieces of different sessions per engine call (default auto: {GPU_MAX_BATCH} for the "
                             "torch engine on a GPU, else 1, no batching)")
    parser.add_argument("--batch-window-ms", type=_non_negative_float, default=BATCH_WINDOW_MS,
                        help=f"how long a short batch waits for more pieces (default {BATCH_WINDOW_MS:g})")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="models directory (default: voicecli's, ~/.local/share/voicecli/models)")
    parser.add_argument("--max-text-chars", type=_positive_int, default=limits.max_text_chars,
                        help="longest accepted text per request")
    parser.add_argument("--token", default=None,
                        help=f"require 'Authorization: Bearer TOKEN' on POST and the WebSocket (default: env "
                             f"{TOKEN_ENV}, else none; prefer the env: a flag shows in the process list)")
    parser.add_argument("--max-queued-requests", type=_positive_int, default=limits.max_queued_requests,
                        help=f"requests one session may queue; more get queue_full (default "
                             f"{limits.max_queued_requests})")
    parser.add_argument("--max-sessions", type=_positive_int, default=limits.max_sessions,
                        help=f"concurrent WebSocket sessions; more are refused (default {limits.max_sessions})")
    parser.add_argument("--idle-timeout-s", type=_non_negative_float, default=limits.idle_timeout_s,
                        help=f"close a session idle this long, 0 never (default {limits.idle_timeout_s:g})")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    serve(host=args.host, port=args.port, engine=args.engine, workers=args.workers, threads=args.threads,
          models_dir=args.models_dir, max_text_chars=args.max_text_chars, log_level=args.log_level, token=args.token,
          max_queued_requests=args.max_queued_requests, max_sessions=args.max_sessions,
          idle_timeout_s=args.idle_timeout_s, max_batch=args.max_batch, batch_window_ms=args.batch_window_ms)


if __name__ == "__main__":
    main()
