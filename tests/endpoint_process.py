"""Test equipment: an endpoint process of a test's own, for what the shared session `server` must not suffer
(a token, tiny limits, kill -9 and restart on the same port). Each start loads the model: ~15 s on 2 cores.

It is the product's launcher (voicecli.tts.local_endpoint.LocalEndpoint: the command line from ServerOptions, the
wait for /ping, terminate then kill), with the tests' defaults and what only tests do to a server (kill -9).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from voicecli.tts.local_endpoint import EndpointStartError, LocalEndpoint
from voicecli.wire.server_options import ServerOptions

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 300.0
"""Import + load + warm-up takes ~15 s on a quiet 2-core machine; much longer when other work shares it."""
STOP_GRACE_S = 15.0


def venv_python() -> str:
    """The repository's virtual environment's interpreter when there is one (what scripts/test runs), else ours."""
    python = REPO / ".venv" / "bin" / "python"
    return str(python if python.exists() else Path(sys.executable))


class EndpointProcess:
    """`python -m voicecli_endpoint` on 127.0.0.1:`port` (onnx engine, 1 thread, `args` on top), logging to
    `log_path`, with `env` added to its environment."""

    def __init__(self, port: int, models_dir: Path, log_path: Path, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        defaults = ServerOptions(port=port, engine="onnx", threads=1, models_dir=models_dir)
        self.endpoint = LocalEndpoint(ServerOptions.from_argv(args, defaults), log_path, timeout_s=STARTUP_TIMEOUT_S,
                                      env=env, python=venv_python(), cwd=REPO)
        self.port = port
        self.log_path = log_path

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.endpoint.process

    @property
    def starts(self) -> int:
        return self.endpoint.starts

    def start(self, wait: bool = True) -> Self:
        self.endpoint.start()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Until /ping says 200; a failure's message ends with the log's last 40 lines."""
        try:
            self.endpoint.wait_ready()
        except EndpointStartError as exc:
            raise EndpointStartError(f"{exc}\n{self.log_tail()}") from None

    def kill(self) -> None:
        """kill -9: no goodbye to anyone (what a crash or an OOM kill looks like to clients)."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=STOP_GRACE_S)

    def stop(self) -> None:
        self.endpoint.stop(STOP_GRACE_S)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> Self:
        """Started and ready (the session's `server`); stopped at the end of the block, or when it never got ready."""
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
