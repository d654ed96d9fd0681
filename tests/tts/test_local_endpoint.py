"""voicecli.tts.local_endpoint: the one launcher of endpoint processes (the chat's autostart, the benches, the tests).

A stand-in server takes the real one's place (the launcher's `python`: a script that logs its command line and
environment, then answers /ping, exits or hangs as told), so what the launcher does around a server is checked in
a fraction of a second. The real server under the launcher: tests/conftest.py's `server` and tests/endpoint_process.py.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from voicecli.tts.local_endpoint import SLOW_HINT, EndpointStartError, LocalEndpoint, ensure_local_endpoint, ping
from voicecli.wire.server_options import TOKEN_ENV, ServerOptions

STAND_IN = f'''#!{sys.executable}
"""Stands in for `python -m voicecli_endpoint`: logs its command line and token, then does what STAND_IN says."""
import http.server, os, sys, time

argv = sys.argv[1:]
print("argv:", " ".join(argv))
print("token:", os.environ.get("{TOKEN_ENV}"), flush=True)
mode = os.environ["STAND_IN"]
if mode == "exit":
    print("loading failed", flush=True)
    sys.exit(3)
if mode == "hang":
    time.sleep(60)


class Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(argv[argv.index("--port") + 1])), Ping).serve_forever()
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _launcher(tmp_path: Path, mode: str, *, token: str | None = None, timeout_s: float = 30.0) -> LocalEndpoint:
    stand_in = tmp_path / "python"
    stand_in.write_text(STAND_IN, encoding="utf-8")
    stand_in.chmod(0o755)
    options = ServerOptions(port=_free_port(), engine="onnx", workers=2, token=token)
    return LocalEndpoint(options, tmp_path / "logs" / "server.log", timeout_s=timeout_s, env={"STAND_IN": mode},
                         python=str(stand_in), slow_hint=SLOW_HINT)


def test_a_started_server_gets_the_options_and_the_token_in_its_environment_only(tmp_path: Path) -> None:
    progress: list[str] = []
    with _launcher(tmp_path, "serve", token="s3cret") as endpoint:
        endpoint.wait_ready(progress.append)  # already ready: says so at once
        assert endpoint.owned and ping(endpoint.host, endpoint.port) == 200
        process = endpoint.process
    assert process is not None and process.poll() is not None  # stopped with the block
    argv, token = (tmp_path / "logs" / "server.log").read_text(encoding="utf-8").splitlines()[:2]
    assert argv == f"argv: -m voicecli_endpoint {' '.join(endpoint.options.to_argv())}"
    assert "--workers 2" in argv and "s3cret" not in argv and token == "token: s3cret"
    assert progress[-1].startswith("endpoint warm after")


def test_without_a_token_in_the_options_the_server_reads_the_environment(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-the-env")
    with _launcher(tmp_path, "serve") as endpoint:
        pass
    assert "token: from-the-env" in endpoint.log_path.read_text(encoding="utf-8")


def test_a_server_that_exits_is_reported_with_its_last_log_lines(tmp_path: Path) -> None:
    failed = r"exited with status 3: .*loading failed \(full log: .*server.log\)"
    with pytest.raises(EndpointStartError, match=failed), _launcher(tmp_path, "exit"):
        pass


def test_a_server_not_ready_in_time_is_stopped_and_the_hint_given(tmp_path: Path) -> None:
    endpoint = _launcher(tmp_path, "hang", timeout_s=0.5).start()
    with pytest.raises(EndpointStartError, match=f"was not ready after 0 s: .*; {SLOW_HINT}"):
        endpoint.wait_ready()
    assert endpoint.process is not None and endpoint.process.poll() is not None


def test_a_restart_appends_to_the_log(tmp_path: Path) -> None:
    endpoint = _launcher(tmp_path, "exit")
    for _ in range(2):
        endpoint.start()
        assert endpoint.process is not None
        endpoint.process.wait(timeout=30)
    assert endpoint.starts == 2 and endpoint.log_path.read_text(encoding="utf-8").count("loading failed") == 2


async def test_the_chat_uses_a_server_already_running_and_leaves_it_alone(tmp_path: Path) -> None:
    with _launcher(tmp_path, "serve") as running:
        progress: list[str] = []
        found = await ensure_local_endpoint(running.options, timeout_s=30.0, progress=progress.append)
        assert not found.owned and found.url == f"ws://127.0.0.1:{running.port}"
        found.stop()
        assert running.process is not None and running.process.poll() is None
        assert progress == [f"using the endpoint already running on 127.0.0.1:{running.port}"]


async def test_without_autostart_a_missing_server_is_an_error_that_says_what_to_do() -> None:
    options = ServerOptions(port=_free_port())
    with pytest.raises(EndpointStartError, match=r"no TTS endpoint answers on .*; start one with `voicecli serve`"):
        await ensure_local_endpoint(options, timeout_s=30.0, autostart=False)
