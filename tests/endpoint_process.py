"""Test equipment: an endpoint process of a test's own, for what the shared session `server` must not suffer
(a token, tiny limits, kill -9 and restart on the same port). Each start loads the model: ~15 s on 2 cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 300.0


class EndpointProcess:
    """`python -m voicecli_endpoint` on 127.0.0.1:`port` (onnx engine, 1 thread), logging to `log_path`."""

    def __init__(self, port: int, models_dir: Path, log_path: Path, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self.port = port
        self.models_dir = models_dir
        self.log_path = log_path
        self.args = list(args)
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> EndpointProcess:
        python = REPO / ".venv" / "bin" / "python"
        command = [str(python if python.exists() else Path(sys.executable)), "-m", "voicecli_endpoint",
                   "--port", str(self.port), "--engine", "onnx", "--threads", "1",
                   "--models-dir", str(self.models_dir), *self.args]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                            env={**os.environ, **self.env})
        self.starts += 1
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"endpoint exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.http_url}/ping", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"endpoint not ready after {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def kill(self) -> None:
        """kill -9: no goodbye to anyone (what a crash or an OOM kill looks like to clients)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
