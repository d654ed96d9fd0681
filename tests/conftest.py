"""Fixtures shared by every test directory.

ONE real Kokoro endpoint process on loopback serves the whole test session (loading the model takes seconds and
about 1 GB, so every test that needs synthesis shares it).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.standins.bedrock import BedrockStandIn
from voicecli.tts.base import TTSTransport

REPO = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 300.0
"""Import + load + warm-up takes ~15 s on a quiet 2-core machine; much longer when other work shares it."""


def _models_dir() -> Path:
    env = os.environ.get("VOICECLI_MODELS_DIR")
    return Path(env) if env else Path.home() / ".local" / "share" / "voicecli" / "models"


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """The models directory (env VOICECLI_MODELS_DIR, else ~/.local/share/voicecli/models)."""
    directory = _models_dir()
    if not (directory / "kokoro" / "kokoro-v1.0.int8.onnx").is_file():
        pytest.fail(f"Kokoro model missing under {directory}: run `voicecli models install --only kokoro`")
    return directory


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class RunningServer:
    port: int
    log_path: Path

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="session")
def server(models_dir: Path) -> Iterator[RunningServer]:
    """`python -m voicecli_endpoint` (onnx engine, 2 parallel workers of 1 thread) on a free port, ready when /ping
    says 200. Two workers: every real-server test also exercises parallel inference."""
    port = _free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="voicecli-endpoint-test-"))
    log_path = log_dir / "server.log"
    python = REPO / ".venv" / "bin" / "python"
    command = [str(python if python.exists() else Path(sys.executable)), "-m", "voicecli_endpoint",
               "--port", str(port), "--engine", "onnx", "--workers", "2", "--threads", "1",
               "--models-dir", str(models_dir)]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT)
    running = RunningServer(port, log_path)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"endpoint exited with {process.returncode}:\n{running.log_tail()}")
            try:
                if httpx.get(f"{running.http_url}/ping", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"endpoint not ready after {STARTUP_TIMEOUT_S:.0f} s:\n{running.log_tail()}")
            time.sleep(0.25)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _private_pulse() -> Iterator[object]:
    """Start a private PulseAudio daemon and re-initialise PortAudio (it enumerates devices once, at import)."""
    import shutil

    from tests.pulse import PrivatePulse
    from voicecli.audio_devices import reinitialize_portaudio

    if shutil.which("pulseaudio") is None:
        pytest.skip("pulseaudio is not installed (apt-get install pulseaudio pulseaudio-utils libasound2-plugins)")
    daemon = PrivatePulse()
    daemon.start()
    try:
        reinitialize_portaudio()
        yield daemon
    finally:
        daemon.stop()
        reinitialize_portaudio()


@pytest.fixture(scope="session")
def pulse() -> Iterator[object]:
    """A private PulseAudio daemon (virtual speaker `vspeaker`, microphone `vmic`) for the whole session.

    Yields a `tests.pulse.PrivatePulse`.
    """
    yield from _private_pulse()


@pytest.fixture
def own_pulse() -> Iterator[object]:
    """A private PulseAudio of one test's own, for tests that kill it (so it must not be the session's `pulse`)."""
    yield from _private_pulse()


@pytest.fixture
def dummy_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Static dummy keys and no ~/.aws files or instance metadata: the real AWS clients sign requests for the
    loopback stand-ins, and nothing outside the test is consulted."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSTANDIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "standin-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bedrock() -> Iterator[BedrockStandIn]:
    """A ConverseStream stand-in on loopback for the real boto3 client (queue its replies)."""
    with BedrockStandIn() as running:
        yield running


@pytest.fixture
async def transports(server: RunningServer) -> AsyncIterator[dict[str, TTSTransport]]:
    """Both modes' transports to the session's endpoint, connected (what a chat session holds)."""
    from voicecli.tts.http_batch import BatchHttpTransport
    from voicecli.tts.websocket import WebSocketTransport

    made: dict[str, TTSTransport] = {"bidi": WebSocketTransport(server.http_url),
                                     "batch": BatchHttpTransport(server.http_url)}
    async with contextlib.AsyncExitStack() as stack:
        for transport in made.values():
            await stack.enter_async_context(transport)
        yield made
