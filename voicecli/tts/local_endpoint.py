"""The offline default: the Kokoro endpoint container's server, run as a child process on this machine.

`voicecli --endpoint local` uses a server already answering on the configured port (e.g. `voicecli serve` in
another terminal); otherwise it starts one, shows progress while the model loads and warms up, and stops it on exit.
The child is the very same server the SageMaker container runs, so local development exercises the real protocol.

A configured `endpoint.token` is handed to the child in its environment (never on the command line, which any
local user can read in the process list), so the autostarted server requires the token the client sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from voicecli.paths import default_state_dir
from voicecli.wire.protocol import PING_PATH, Limits
from voicecli.wire.server_options import TOKEN_ENV


class EndpointStartError(RuntimeError):
    """The local endpoint could not be started; the message carries the server's last log lines."""


def ping(host: str, port: int, timeout_s: float = 1.0) -> int | None:
    """Status of GET /ping (200 ready, 503 warming up), None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{PING_PATH}", timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


class LocalEndpoint:
    """A running local endpoint: either found already up, or a child process we own and stop."""

    def __init__(self, host: str, port: int, process: subprocess.Popen[bytes] | None, log_path: Path | None) -> None:
        self.host = host
        self.port = port
        self.process = process
        self.log_path = log_path

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def owned(self) -> bool:
        return self.process is not None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


async def ensure_local_endpoint(
    host: str,
    port: int,
    engine: str,
    threads: int | None,
    models_dir: Path,
    timeout_s: float,
    autostart: bool = True,
    progress: Callable[[str], None] = lambda message: None,
    token: str = "",
    limits: Limits | None = None,
    workers: int | None = None,
) -> LocalEndpoint:
    """Return a ready endpoint on host:port, starting one when none answers (and autostart allows).

    `token`, `limits` and the sizes (`workers`, `threads`; None: auto) apply to a server this call starts (one
    already running keeps its own).
    """
    status = await asyncio.to_thread(ping, host, port)
    if status == 200:
        progress(f"using the endpoint already running on {host}:{port}")
        return LocalEndpoint(host, port, None, None)
    if status is None and not autostart:
        raise EndpointStartError(f"no TTS endpoint answers on {host}:{port}; start one with `voicecli serve`")
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    if status is None:
        log_path = default_state_dir() / f"endpoint-{port}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        progress(f"starting the local Kokoro endpoint ({engine} engine) on {host}:{port}")
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                server_command(host, port, engine, threads, models_dir, limits, workers),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, TOKEN_ENV: token},
            )
    endpoint = LocalEndpoint(host, port, process, log_path)
    started = time.monotonic()
    shown = ""
    while True:
        status = await asyncio.to_thread(ping, host, port, 0.5)
        if status == 200:
            progress(f"endpoint warm after {time.monotonic() - started:.1f} s")
            return endpoint
        if process is not None and process.poll() is not None:
            raise EndpointStartError(f"the local endpoint exited with status {process.returncode}: "
                                     f"{_tail(log_path)} (full log: {log_path})")
        if time.monotonic() - started > timeout_s:
            endpoint.stop()
            raise EndpointStartError(f"the local endpoint was not ready after {timeout_s:.0f} s "
                                     f"(log: {log_path}); raise endpoint.connect_timeout_s on a slow machine")
        message = "loading the model" if status is None else "warming up"
        if message != shown:
            progress(message)
            shown = message
        await asyncio.sleep(0.25)


def server_command(host: str, port: int, engine: str, threads: int | None, models_dir: Path,
                   limits: Limits | None = None, workers: int | None = None) -> list[str]:
    """The child's command line: everything but the token (that travels in the environment). None: auto."""
    command = [sys.executable, "-m", "voicecli_endpoint", "--host", host, "--port", str(port), "--engine", engine,
               "--workers", "auto" if workers is None else str(workers),
               "--threads", "auto" if threads is None else str(threads), "--models-dir", str(models_dir)]
    if limits is not None:
        command += ["--max-sessions", str(limits.max_sessions),
                    "--max-queued-requests", str(limits.max_queued_requests),
                    "--idle-timeout-s", f"{limits.idle_timeout_s:g}"]
    return command


def _tail(path: Path | None, lines: int = 3) -> str:
    if path is None:
        return ""
    with contextlib.suppress(OSError):
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])
    return ""
