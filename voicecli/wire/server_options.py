"""The Kokoro endpoint's options, defined once: `ServerOptions`, and the command line that carries them.

One type for one job: `voicecli serve` and `python -m voicecli_endpoint` parse their command lines into it, the
server (voicecli_endpoint.server.serve) runs from it, and a process that starts an endpoint (the chat's autostart,
the benches, the tests: voicecli.tts.local_endpoint) turns it back into a command line with `to_argv`. Both
commands take the same options with the same meaning; only where an option not given comes from differs: the
container's entry point falls back to the built-in defaults below (`ServerOptions()`), `voicecli serve` and the
autostarted server to the user's settings (`ServerOptions.from_config`).

The module lives on the voicecli side, next to the wire protocol, because the endpoint package already depends on
voicecli (voicecli.wire) and voicecli must not depend on the endpoint package at import time: the client's parser is
built on every `voicecli` run, with or without the endpoint's extra installed. For the same reason the two batching
constants below stay here although only the endpoint acts on them: `voicecli serve --help` states their values.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from voicecli.logs import add_log_options
from voicecli.wire.protocol import DEFAULTS

TOKEN_ENV = "VOICECLI_ENDPOINT__TOKEN"
"""Where the server reads its bearer token when no --token is given: the client's `endpoint.token` override, so
one variable sets both."""

DEFAULT_HOST = "127.0.0.1"
"""Loopback by default: a local endpoint stays off the network. The container passes 0.0.0.0."""
DEFAULT_PORT = 8080
"""The SageMaker container contract's port."""

EngineName = Literal["auto", "onnx", "torch"]
ENGINE_NAMES: tuple[EngineName, ...] = ("auto", "onnx", "torch")

GPU_MAX_BATCH = 8
"""Pieces per batch under `auto` on a GPU. The frame side still runs per piece (engines/torch_engine.py), so the
gain levels off: 8 gets ~94% of what an unbounded batch would save by the launch-count model in container/README.md,
and a piece never waits behind more than 7 others' frame sides."""
BATCH_WINDOW_MS = 10.0
"""How long a short batch waits for more pieces. Sessions served by one batch send their next pieces within a few
milliseconds of each other (MP3 encoding of the last piece); 10 ms is a fraction of one GPU piece (tens of ms)."""

SHARED_WITH_CLIENT = ("models_dir", "log_level", "log_file")
"""Options `voicecli` already takes for every command (same names, same meaning); `voicecli serve` gets them there."""


@dataclass(frozen=True)
class ServerOptions:
    """Everything the server runs with (voicecli_endpoint.server.serve takes one). The defaults are the server's
    built-in ones. None sizes mean `auto`."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    engine: str = "auto"
    workers: int | None = None
    threads: int | None = None
    max_batch: int | None = None
    batch_window_ms: float = BATCH_WINDOW_MS
    models_dir: Path | None = None
    """None: voicecli's default models directory."""
    max_text_chars: int = DEFAULTS.limits.max_text_chars
    token: str | None = field(default=None, repr=False)
    """None: read TOKEN_ENV; "": no token required. repr=False: options get logged."""
    max_queued_requests: int = DEFAULTS.limits.max_queued_requests
    max_sessions: int = DEFAULTS.limits.max_sessions
    idle_timeout_s: float = DEFAULTS.limits.idle_timeout_s
    log_level: str = "info"
    log_file: Path | None = None

    @classmethod
    def from_config(cls, config: ServerConfig) -> ServerOptions:
        """The options of the server on this machine by the user's settings: [endpoint.local], endpoint.token and
        models.dir; what the settings do not cover (batch window, text limit, logging) keeps its built-in default.

        `voicecli serve` (under its command-line options) and the autostarted local server both start from these,
        so the server the chat starts is the one `voicecli serve` would run.
        """
        local = config.endpoint.local
        return cls(host=local.host, port=local.port, engine=local.engine, workers=local.workers,
                   threads=local.threads, max_batch=local.max_batch, models_dir=config.models_dir,
                   token=config.endpoint.token, max_queued_requests=local.max_queued_requests,
                   max_sessions=local.max_sessions, idle_timeout_s=local.idle_timeout_s)

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None = None, fallback: ServerOptions | None = None, *,
                  prog: str | None = None, description: str | None = None) -> ServerOptions:
        """Read a `python -m voicecli_endpoint` command line (None: sys.argv); an option not given comes from
        `fallback` (None: the built-in defaults). `prog` and `description` are what --help shows."""
        parser = argparse.ArgumentParser(prog=prog, description=description)
        add_server_options(parser)
        return resolve(parser.parse_args(argv), cls() if fallback is None else fallback)

    def to_argv(self) -> list[str]:
        """The `python -m voicecli_endpoint` arguments that give these options, every one spelled out (so the child
        does not fall back on defaults of its own), except the token.

        Why not the token: a command line is readable by every local user (the process list); a starter hands the
        token to the child in its environment (TOKEN_ENV) instead. `from_argv(to_argv())` gives these options back
        with `token=None`, which reads that environment.
        """
        argv: list[str] = []
        for option in dataclasses.fields(self):
            value = getattr(self, option.name)
            if option.name == "token" or (value is None and option.name not in AUTO_COUNTS):
                continue  # None: models_dir and log_file not given (their defaults)
            argv += [f"--{option.name.replace('_', '-')}", AUTO if value is None else str(value)]
        return argv


class ServerConfig(Protocol):
    """What `ServerOptions.from_config` reads of voicecli.config.Config.

    Why a protocol and not Config itself: this module sits beside voicecli.config in the layers and never imports it
    (the endpoint imports this module, and must not pull in the client's settings); mypy checks at each caller that
    Config has this shape.
    """

    @property
    def endpoint(self) -> _EndpointSection: ...

    @property
    def models_dir(self) -> Path: ...


class _EndpointSection(Protocol):
    """[endpoint]: the token, and [endpoint.local]."""

    @property
    def token(self) -> str: ...

    @property
    def local(self) -> _LocalSection: ...


class _LocalSection(Protocol):
    """[endpoint.local]: the server on this machine (None sizes: auto)."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def engine(self) -> str: ...

    @property
    def workers(self) -> int | None: ...

    @property
    def threads(self) -> int | None: ...

    @property
    def max_batch(self) -> int | None: ...

    @property
    def max_sessions(self) -> int: ...

    @property
    def max_queued_requests(self) -> int: ...

    @property
    def idle_timeout_s(self) -> float: ...


AUTO = "auto"
AUTO_COUNTS = ("workers", "threads", "max_batch")


def auto_or_count(text: str) -> int | str:
    """`--workers`/`--threads`/`--max-batch`: "auto" (kept as text until `resolve`, so that an explicit auto is told
    apart from "not given"), else a whole number of at least 1."""
    cleaned = text.strip().lower()
    if cleaned == AUTO:
        return AUTO
    if not cleaned.isdigit() or int(cleaned) < 1:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a whole number of at least 1, not {text!r}")
    return int(cleaned)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def port_number(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is at most 65535, got {value}")
    return value


def add_server_options(parser: argparse.ArgumentParser, *, within_voicecli: bool = False) -> None:
    """Add every server option to `parser`, each defaulting to None ("not given": see `resolve`).

    `within_voicecli`: the parser is `voicecli serve`, whose global options already include SHARED_WITH_CLIENT.
    """
    built_in = ServerOptions()
    limits = DEFAULTS.limits
    parser.add_argument("--host", default=None, help=f"address to bind (default {DEFAULT_HOST}; the container "
                        "uses 0.0.0.0)")
    parser.add_argument("--port", type=port_number, default=None, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--engine", choices=ENGINE_NAMES, default=None,
                        help="synthesis engine (default auto: torch on a CUDA GPU, else onnx)")
    parser.add_argument("--workers", type=auto_or_count, default=None, metavar="N|auto",
                        help="parallel inferences (default auto: one per usable core on a CPU, one on a GPU)")
    parser.add_argument("--threads", type=auto_or_count, default=None, metavar="N|auto",
                        help="intra-op threads per inference (default auto: usable cores / workers)")
    parser.add_argument("--max-batch", type=auto_or_count, default=None, metavar="N|auto",
                        help=f"pieces of different sessions per engine call (default auto: {GPU_MAX_BATCH} for the "
                             "torch engine on a GPU, else 1, no batching)")
    parser.add_argument("--batch-window-ms", type=non_negative_float, default=None, metavar="MS",
                        help=f"how long a short batch waits for more pieces (default {BATCH_WINDOW_MS:g})")
    parser.add_argument("--max-text-chars", type=positive_int, default=None, metavar="N",
                        help=f"longest accepted text per request (default {limits.max_text_chars})")
    parser.add_argument("--token", default=None,
                        help=f"require 'Authorization: Bearer TOKEN' on POST and the WebSocket (default: env "
                             f"{TOKEN_ENV}, else none; prefer the env: a flag shows in the process list)")
    parser.add_argument("--max-queued-requests", type=positive_int, default=None, metavar="N",
                        help=f"requests one session may queue; more get queue_full (default "
                             f"{limits.max_queued_requests})")
    parser.add_argument("--max-sessions", type=positive_int, default=None, metavar="N",
                        help=f"concurrent sessions and POSTs; more are refused (default {limits.max_sessions})")
    parser.add_argument("--idle-timeout-s", type=non_negative_float, default=None, metavar="S",
                        help=f"close a session idle this long, 0 never (default {limits.idle_timeout_s:g})")
    if not within_voicecli:
        parser.add_argument("--models-dir", type=Path, default=None, metavar="DIR",
                            help="models directory (default: voicecli's, ~/.local/share/voicecli/models)")
        add_log_options(parser, level_default=None, level_help=f"log level (default {built_in.log_level})")


def resolve(args: argparse.Namespace, fallback: ServerOptions) -> ServerOptions:
    """The options given on the command line, each one not given (None or absent) taken from `fallback`."""
    given = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(ServerOptions)}
    chosen = {name: value for name, value in given.items() if value is not None}
    chosen.update({name: None for name in AUTO_COUNTS if chosen.get(name) == AUTO})
    return dataclasses.replace(fallback, **chosen)
