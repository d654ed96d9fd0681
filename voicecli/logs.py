"""Where log lines go: the `--log-level`/`--log-file` options, defined once for `voicecli` and the endpoint.

Why one definition: `voicecli serve` and `python -m voicecli_endpoint` run the same server and must accept the same
options (voicecli.wire.server_options), and the client's own log options mean the same thing there. Why a file at all:
the full-screen app owns the terminal, so a log line written to it would tear the screen; the app's default
destination is therefore a file in the state directory (voicecli.logs.default_log_file).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from voicecli.paths import default_state_dir

LOG_LEVELS = ("debug", "info", "warning", "error")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "voicecli"
"""Ours among the root logger's handlers: replaced on a second call, while others' (a test runner's) stay."""


def default_log_file() -> Path:
    """Where the full-screen app logs when no --log-file is given: $XDG_STATE_HOME/voicecli/voicecli.log."""
    return default_state_dir() / "voicecli.log"


def add_log_options(parser: argparse.ArgumentParser, *, level_default: Any, level_help: str) -> None:
    """`--log-level` and `--log-file` (both store onto `log_level`/`log_file`)."""
    parser.add_argument("--log-level", default=level_default, choices=LOG_LEVELS, type=str.lower,
                        help=level_help)
    parser.add_argument("--log-file", default=argparse.SUPPRESS if level_default is argparse.SUPPRESS else None,
                        type=Path, metavar="PATH", help="append log lines to this file instead of standard error")


def configure_logging(level: str, log_file: Path | None) -> None:
    """Send the root logger's records at `level` and above to `log_file` (appended), else to standard error.

    Raises OSError when the file cannot be opened, so the caller can say so in one line.
    """
    handler: logging.Handler
    if log_file is not None:
        log_file.expanduser().parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_file.expanduser(), encoding="utf-8")
    else:
        handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:  # a second call replaces the first
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.setLevel(level.upper())


def installed_handlers() -> list[logging.Handler]:
    """The handler(s) `configure_logging` put on the root logger (for loggers that do not propagate, uvicorn's)."""
    return [h for h in logging.getLogger().handlers if h.get_name() == _HANDLER_NAME]
