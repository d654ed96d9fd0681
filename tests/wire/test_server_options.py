"""voicecli.wire.server_options: `voicecli serve` and `python -m voicecli_endpoint` take the same options.

The last test starts both for real (no model: an empty models directory, so nothing heavy loads) and reads what
each says in its log file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
from voicecli_endpoint.__main__ import parse_options
from voicecli_endpoint.server import serve

from voicecli.cli import build_parser
from voicecli.config import Config
from voicecli.wire.server_options import ServerOptions, add_server_options, resolve

CLIENT_ONLY = {"--endpoint", "--llm", "--llm-model", "--config", "--input-device", "--output-device"}
"""voicecli's global options that mean nothing to a server."""


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings} - {"-h", "--help"}


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    child: argparse.ArgumentParser = action.choices[name]
    return child


def test_both_commands_take_the_same_options() -> None:
    endpoint = argparse.ArgumentParser()
    add_server_options(endpoint)
    serve_flags = _flags(_subparser(build_parser(), "serve"))
    assert serve_flags - CLIENT_ONLY == _flags(endpoint)
    assert {"--token", "--log-level", "--log-file", "--max-text-chars", "--batch-window-ms"} <= _flags(endpoint)


def test_the_options_are_what_serve_takes() -> None:
    assert typing.get_type_hints(serve) == {"options": ServerOptions, "return": type(None)}


def test_the_command_line_of_some_options_reads_back_as_them(tmp_path: Path) -> None:
    """What a launcher passes its child (to_argv) is what the child parses (from_argv), every field, token aside."""
    options = ServerOptions(host="0.0.0.0", port=9001, engine="onnx", workers=3, threads=None, max_batch=4,
                            batch_window_ms=2.5, models_dir=tmp_path, max_text_chars=100, token="secret",
                            max_queued_requests=7, max_sessions=5, idle_timeout_s=0.25, log_level="debug",
                            log_file=tmp_path / "log")
    argv = options.to_argv()
    assert "secret" not in argv and "--token" not in argv
    assert ServerOptions.from_argv(argv) == dataclasses.replace(options, token=None)
    assert ServerOptions.from_argv(ServerOptions().to_argv()) == ServerOptions()


def test_the_settings_give_the_options_of_the_local_server(tmp_path: Path) -> None:
    config = Config.defaults().override({"endpoint.local.port": 9002, "endpoint.local.workers": "3",
                                         "endpoint.local.max_sessions": 4, "endpoint.token": "t",
                                         "models.dir": str(tmp_path)}, "test")
    options = ServerOptions.from_config(config)
    assert (options.port, options.workers, options.threads, options.max_batch) == (9002, 3, None, None)
    assert (options.max_sessions, options.token, options.models_dir) == (4, "t", tmp_path)
    assert options.batch_window_ms == ServerOptions().batch_window_ms


def test_endpoint_defaults_are_the_built_in_ones() -> None:
    assert parse_options([]) == ServerOptions()
    options = parse_options(["--workers", "3", "--threads", "auto", "--log-level", "DEBUG", "--token", "t"])
    assert (options.workers, options.threads, options.log_level, options.token) == (3, None, "debug", "t")


def test_an_option_not_given_comes_from_the_fallback_and_auto_wins_over_it() -> None:
    parser = argparse.ArgumentParser()
    add_server_options(parser)
    from_settings = ServerOptions(port=9000, workers=4, threads=2, max_sessions=5)
    options = resolve(parser.parse_args(["--workers", "auto", "--max-sessions", "7"]), from_settings)
    assert (options.port, options.workers, options.threads, options.max_sessions) == (9000, None, 2, 7)


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_a_bad_count_is_refused(value: str) -> None:
    parser = argparse.ArgumentParser()
    add_server_options(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--workers", value])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.slow  # starts the real endpoint server process (no model: it logs its settings and fails to load)
@pytest.mark.parametrize("command", [["voicecli", "serve"], ["voicecli_endpoint"]])
def test_both_commands_start_the_server_with_them(command: list[str], tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", *command, "--port", str(port), "--engine", "onnx", "--models-dir",
            str(tmp_path / "no-models"), "--max-sessions", "3", "--idle-timeout-s", "0", "--log-level", "debug",
            "--log-file", str(log)]
    env = {**os.environ, "VOICECLI_ENDPOINT__TOKEN": "from-the-env"}
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env)
    try:
        deadline = time.monotonic() + 60
        while "Uvicorn running" not in (log.read_text(encoding="utf-8") if log.exists() else ""):
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, log.read_text(encoding="utf-8") if log.exists() else "no log"
            time.sleep(0.1)
    finally:
        process.terminate()
        output = process.communicate(timeout=15)[0].decode(errors="replace")
    text = log.read_text(encoding="utf-8")
    assert f"serving on 127.0.0.1:{port}; bearer token required; limits: 3 sessions" in text
    assert "idle timeout off" in text and "from-the-env" not in text
    assert "Uvicorn running" not in output  # uvicorn's own lines went to the file too
