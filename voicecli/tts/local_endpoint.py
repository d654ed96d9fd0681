"""The Kokoro endpoint as a child process on this machine: the one way voicecli starts one and waits for it.

`voicecli --endpoint local` uses a server already answering on the configured port (e.g. `voicecli serve` in
another terminal); otherwise it starts one, shows progress while the model loads and warms up, and stops it on exit
(`ensure_local_endpoint`; the benches resolve `--endpoint local` the same way). The child is the very same server
the SageMaker container runs, so local development exercises the real protocol. The tests start theirs with
`LocalEndpoint` itself (tests/endpoint_process.py), so a test server is started, awaited and stopped as the chat's is.

The child's command line is `ServerOptions.to_argv()`: the options `voicecli serve` and `python -m voicecli_endpoint`
share, built from the settings by `ServerOptions.from_config`. The token (endpoint.token) is handed to the child in
its environment, never on the command line, which any local user can read in the process list, so the autostarted
server requires the token the client sends.
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
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from voicecli.paths import default_state_dir
from voicecli.wire.protocol import PING_PATH
from voicecli.wire.server_options import TOKEN_ENV, ServerOptions

Progress = Callable[[str], None]

PING_TIMEOUT_S = 1.0
"""How long one GET /ping may take. A loading server answers at once (its model loads off the event loop); a
timeout only means "not answering yet", and the wait asks again."""
POLL_S = 0.25
"""Between two /ping calls while waiting: a fraction of the seconds a model takes to load."""
SLOW_HINT = "raise endpoint.connect_timeout_s on a slow machine"


class EndpointStartError(RuntimeError):
    """The local endpoint could not be started; the message carries the server's last log lines."""


def ping(host: str, port: int, timeout_s: float = PING_TIMEOUT_S) -> int | None:
    """Status of GET /ping (200 ready, 503 warming up), None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{PING_PATH}", timeout=timeout_s) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


def _quiet(message: str) -> None:
    """The progress of a starter that shows none."""


class LocalEndpoint:
    """The endpoint at `options.host:options.port`: a child process of ours (`start`), or one found already running
    (never started here: not `owned`, and `stop` leaves it alone).

    `with LocalEndpoint(...) as endpoint:` starts it, waits until /ping says 200 and stops it when the block ends
    (the tests). The chat starts it and awaits `ready`, so its event loop keeps drawing the progress meanwhile.
    """

    def __init__(self, options: ServerOptions, log_path: Path, *, timeout_s: float,
                 env: Mapping[str, str] | None = None, python: str = sys.executable, cwd: Path | None = None,
                 slow_hint: str = "") -> None:
        """`log_path`: the child's standard output and error. `timeout_s`: how long a wait for readiness lasts.
        `env`: set in the child's environment on top of ours. `python`: the interpreter that runs the server.
        `slow_hint`: advice added when the server is not ready in time (which setting raises the timeout depends on
        who started it)."""
        self.options = options
        self.log_path = log_path
        self.timeout_s = timeout_s
        self.env = dict(env or {})
        self.python = python
        self.cwd = cwd
        self.slow_hint = slow_hint
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        """How many times `start` ran (a test restarts a killed server on the same port)."""

    @property
    def host(self) -> str:
        return self.options.host

    @property
    def port(self) -> int:
        return self.options.port

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    @property
    def owned(self) -> bool:
        return self.process is not None

    def command(self) -> list[str]:
        """The child's command line: the options, all but the token (that travels in the environment)."""
        return [self.python, "-m", "voicecli_endpoint", *self.options.to_argv()]

    def start(self) -> Self:
        """Start the server as our child; it answers /ping (503) within a second and loads its model meanwhile.

        The first start empties the log; a restart appends to it, so the log tells both runs' story.
        """
        env = {**os.environ, **self.env}
        if self.options.token is not None:  # None: the child reads TOKEN_ENV as we were given it
            env[TOKEN_ENV] = self.options.token
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab" if self.starts else "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, cwd=self.cwd)
        self.starts += 1
        return self

    def wait_ready(self, progress: Progress = _quiet) -> None:
        """Block until /ping says 200; raises EndpointStartError when the child exits or `timeout_s` passes."""
        readiness = _Readiness(self, progress)
        while not readiness.settled(ping(self.host, self.port)):
            time.sleep(POLL_S)

    async def ready(self, progress: Progress = _quiet) -> None:
        """`wait_ready` without blocking the event loop (each /ping runs on a worker thread)."""
        readiness = _Readiness(self, progress)
        while not readiness.settled(await asyncio.to_thread(ping, self.host, self.port)):
            await asyncio.sleep(POLL_S)

    def stop(self, grace_s: float = 10.0) -> None:
        """Terminate our child, killing it when it has not exited within `grace_s`; nothing when it is not ours."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=grace_s)

    def log_tail(self, lines: int = 3) -> list[str]:
        """The last `lines` lines of the child's log (none when there is no log)."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:]
        return []

    def failure(self, what: str, hint: str = "") -> EndpointStartError:
        """The error that says the server `what` (e.g. "exited with status 1"), with its log's last lines."""
        log = f": {' | '.join(self.log_tail())} (full log: {self.log_path})" if self.owned else ""
        return EndpointStartError(f"the local endpoint {what}{log}" + (f"; {hint}" if hint else ""))

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class _Readiness:
    """One wait for /ping to say 200: what each answer means, for the blocking and the async wait alike."""

    def __init__(self, endpoint: LocalEndpoint, progress: Progress) -> None:
        self.endpoint = endpoint
        self.progress = progress
        self.started = time.monotonic()
        self.shown = ""

    def settled(self, status: int | None) -> bool:
        """True once ready, False to ask again; raises EndpointStartError when the child exited or time is up (the
        child is stopped then: nobody would use a server that came up later)."""
        endpoint, elapsed = self.endpoint, time.monotonic() - self.started
        if status == 200:
            self.progress(f"endpoint warm after {elapsed:.1f} s")
            return True
        if endpoint.process is not None and endpoint.process.poll() is not None:
            raise endpoint.failure(f"exited with status {endpoint.process.returncode}")
        if elapsed > endpoint.timeout_s:
            endpoint.stop()
            raise endpoint.failure(f"was not ready after {endpoint.timeout_s:.0f} s", endpoint.slow_hint)
        message = "loading the model" if status is None else "warming up"
        if message != self.shown:
            self.progress(message)
            self.shown = message
        return False


async def ensure_local_endpoint(options: ServerOptions, timeout_s: float, autostart: bool = True,
                                progress: Progress = _quiet) -> LocalEndpoint:
    """A ready endpoint at `options.host:options.port`: the one answering there, else one started with `options`
    (when `autostart` allows), logging to the state directory. The options apply only to a server this call starts;
    one already running keeps its own. The caller stops the result (`stop`) when done with it."""
    host, port = options.host, options.port
    endpoint = LocalEndpoint(options, default_state_dir() / f"endpoint-{port}.log", timeout_s=timeout_s,
                             slow_hint=SLOW_HINT)
    status = await asyncio.to_thread(ping, host, port)
    if status == 200:
        progress(f"using the endpoint already running on {host}:{port}")
        return endpoint
    if status is None:  # else one is there, still warming up: wait for it
        if not autostart:
            raise EndpointStartError(f"no TTS endpoint answers on {host}:{port}; start one with `voicecli serve`")
        progress(f"starting the local Kokoro endpoint ({options.engine} engine) on {host}:{port}")
        endpoint.start()
    try:
        await endpoint.ready(progress)
    except BaseException:  # failed, or the front end went away meanwhile: no orphan server left behind
        endpoint.stop()
        raise
    return endpoint
