"""The real endpoint app, served in this process with the fake engine and phonemizer: a fast tier's `server`.

What is real: `voicecli_endpoint.app.create_app` with its lifespan and loader (sizing, scheduler, warm-up), every
route, the WebSocket session, the validation, the fair scheduler and its worker threads, the synthesizer's
chunking and silence trimming, the MP3 / PCM16 encoders, and uvicorn on a loopback port, so any client (the
`websockets` library, the WebSocket transport, httpx) talks to it over a real socket. What is fake: the engine
(tests.fakes.engine.ToneEngine) and the phonemizer (tests.fakes.phonemizer.FakePhonemizer), put in place of what
`EndpointState.load` would load only while it loads (it imports both at call time), so nothing else in the test
session sees them. It starts in a fraction of a second, where the real `server` fixture loads Kokoro (~15 s).

uvicorn runs on a thread of its own with its own event loop: the endpoint keeps serving while a test's loop is
busy, as a separate process would, and the test can still reach into it (the engine's gate, the app's state).
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import pytest
from starlette.applications import Starlette

from tests.fakes.engine import ToneEngine
from tests.fakes.phonemizer import FakePhonemizer
from voicecli.wire.protocol import PING_PATH, STATS_PATH, WS_PATH, Limits

START_TIMEOUT_S = 30.0
"""Generous for a loaded 2-core machine; it takes ~0.1 s on a quiet one."""


class InProcessEndpoint:
    """`with InProcessEndpoint() as endpoint:` serves the real app on 127.0.0.1 (see the module docstring).

    `limits`, `workers`, `token`: as `voicecli serve` takes them. `engine`: a ToneEngine of the caller's own (a
    fresh one by default), reachable as `endpoint.engine` to hold syntheses.
    """

    def __init__(self, *, limits: Limits | None = None, workers: int = 2, token: str = "",
                 engine: ToneEngine | None = None) -> None:
        self.limits = limits or Limits()
        self.workers = workers
        self.token = token
        self.engine = engine or ToneEngine()
        self.app: Starlette | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{WS_PATH}"

    @property
    def state(self) -> Any:
        """The app's `EndpointState` (read it, do not change it: it lives on the server's thread)."""
        assert self.app is not None
        return self.app.state.endpoint

    def stats(self) -> dict[str, Any]:
        """GET /stats, as an operator would read it."""
        stats: dict[str, Any] = httpx.get(f"{self.http_url}{STATS_PATH}", timeout=10).json()
        return stats

    def __enter__(self) -> Self:
        import uvicorn
        from voicecli_endpoint import g2p
        from voicecli_endpoint.app import ServerSettings, create_app
        from voicecli_endpoint.engines import select

        settings = ServerSettings(engine="onnx", models_dir=Path(tempfile.gettempdir()), workers=self.workers,
                                  threads=1, limits=self.limits, token=self.token)
        self.app = create_app(settings)
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        # As server.serve configures it: big WebSocket messages reach the app, which answers frame_too_large.
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="on",
                                ws_max_size=max(self.limits.max_frame_bytes * 16, 1 << 20),
                                timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        engine = self.engine
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(select, "load_engine", lambda *args, **kwargs: engine)
            patch.setattr(g2p, "Phonemizer", FakePhonemizer)
            self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                            name=f"endpoint-{self.port}", daemon=True)
            self._thread.start()
            try:
                self._wait_ready()
            except BaseException:
                self._stop()
                raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (self._server.started and self.app is not None and hasattr(self.app.state, "endpoint")
                   and self.state.ready.is_set()):
            assert self._thread is not None
            if not self._thread.is_alive():
                raise RuntimeError("the in-process endpoint stopped while starting (see the log)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the in-process endpoint was not ready after {START_TIMEOUT_S:.0f} s")
            time.sleep(0.005)
        if self.state.load_error is not None:
            raise RuntimeError(f"the in-process endpoint failed to load: {self.state.load_error}")
        ping = httpx.get(f"{self.http_url}{PING_PATH}", timeout=10)
        if ping.status_code != 200:
            raise RuntimeError(f"the in-process endpoint answers /ping with {ping.status_code}: {ping.text}")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def _stop(self) -> None:
        self.engine.release()  # a held synthesis must not keep a worker (and the shutdown) waiting
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
