"""Fixtures shared by every test directory, and the rule that sorts tests into the fast and the slow tier.

ONE real Kokoro endpoint process on loopback serves the whole test session (loading the model takes seconds and
about 1 GB, so every test that needs synthesis shares it). The fast tier's stand-in for it is `fake_endpoint`: the
real endpoint app in this process, with an instant tone engine (tests/fakes/).

Two tiers (scripts/test runs both; `scripts/test --fast` only the first):
- fast: everything not marked `slow`; fakes and stand-ins only, minutes in all on 2 cores;
- slow: every test that uses a real resource: a real endpoint process, a PulseAudio daemon, or a real model.
A test is put in the slow tier by the fixtures it uses (`pytest_collection_modifyitems` below, from
REAL_RESOURCE_FIXTURES), so a new test that asks for `server` is slow without anyone remembering to say so.
Tests that start a real resource without such a fixture (a subprocess of the real app, real-time playback) carry
`@pytest.mark.slow` by hand.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from tests.endpoint_process import EndpointProcess
from tests.fakes.endpoint import InProcessEndpoint
from tests.standins.bedrock import BedrockStandIn
from voicecli.tts.base import TTSTransport

REPO = Path(__file__).resolve().parents[1]

REAL_RESOURCE_FIXTURES: Final = frozenset({
    # module that defines the fixture : fixture name
    "tests.conftest:models_dir",  # the installed models (Kokoro, Whisper, ...)
    "tests.conftest:server",  # a real endpoint process with Kokoro loaded
    "tests.conftest:pulse",  # a PulseAudio daemon
    "tests.conftest:own_pulse",
    "tests.listen.test_endpointing:vad",  # Silero VAD
    "tests.listen.test_transcription:transcriber",  # faster-whisper tiny.en
    "tests.endpoint.test_g2p:phonemizer",  # misaki with spaCy's en_core_web_sm and espeak-ng
    "tests.endpoint.test_engine_parity:phonemes",  # the same
    "tests.llm.test_local:smollm2",  # a GGUF model in llama.cpp
    "tests.container.test_cdk_stack:default",  # a CDK synth: the jsii Node.js runtime, seconds per start
})
"""Fixtures that start or load a real resource, by the module that defines them and their name. Fixtures that
depend on one of them (`transports` on `server`, `transcriber` on `models_dir`) need no entry: pytest's closure of
a test's fixtures includes them. Qualified by module because a name alone is not a resource: tests/llm's `server`
is a loopback stand-in and tests/models' `models_dir` a temporary folder, both fast."""


def _defined_in(item: pytest.Item, name: str) -> str:
    """`module:name` of the fixture `name` as this item resolves it (the innermost override), or `?:name`."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the resolution (no public API for it)
    definitions = getattr(info, "name2fixturedefs", {}).get(name) if info is not None else None
    if not definitions:
        return f"?:{name}"
    return f"{definitions[-1].func.__module__}:{name}"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marker must be there when it looks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` every test whose fixtures (their whole closure) include a REAL_RESOURCE_FIXTURES entry."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if any(_defined_in(item, name) in REAL_RESOURCE_FIXTURES for name in names):
            item.add_marker(pytest.mark.slow)


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
    """`python -m voicecli_endpoint` (onnx engine, 2 parallel workers, threads sized `auto` as the product sizes
    them) on a free port, ready when /ping says 200, started and stopped by the product's launcher
    (tests/endpoint_process.py). Two workers: every real-server test also exercises parallel inference. Threads
    `auto`, not 1: a lone request then runs on every core, as it does for users; on one thread per request the
    machines of 2026-12 synthesize Kokoro slower than real time (a 1.66 s answer took 1.2 s after its first byte),
    so playback underran and the tests that compare what the speaker played with the endpoint's audio measured
    the gaps (correlation 0.58 against 0.997)."""
    log_path = Path(tempfile.mkdtemp(prefix="voicecli-endpoint-test-")) / "server.log"
    with EndpointProcess(_free_port(), models_dir, log_path, ["--workers", "2", "--threads", "auto"]) as endpoint:
        yield RunningServer(endpoint.port, log_path)


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


@pytest.fixture(scope="session")
def fake_endpoint() -> Iterator[InProcessEndpoint]:
    """The real endpoint app with the instant tone engine, in this process (tests/fakes/endpoint.py), for the
    whole session: the fast tier's `server`. Its engine can be held (`fake_endpoint.engine.held()`)."""
    with InProcessEndpoint() as endpoint:
        yield endpoint


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
