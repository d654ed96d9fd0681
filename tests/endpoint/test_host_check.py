"""The Host check's rules (access.host_allowed) and the one case no test may start a real server for: the container
behind SageMaker, bound to every interface without a token. The real-server probes are in test_access.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from voicecli_endpoint.access import host_allowed
from voicecli_endpoint.app import EndpointState, ServerSettings, create_app


@pytest.mark.parametrize(("bind", "token", "host", "allowed"), [
    ("127.0.0.1", "", "localhost:8080", True),
    ("127.0.0.1", "", "[::1]", True),
    ("127.0.0.1", "", "rebound.attacker.example:8080", False),
    ("127.0.0.1", "", "127.0.0.1.nip.io", False),
    ("127.0.0.1", "", "::1", False),  # not a valid Host: IPv6 needs brackets
    ("127.0.0.1", "", None, True),  # HTTP/1.0 without Host: a program, not a browser
    ("127.0.0.1", "a-token", "rebound.attacker.example", True),
    ("192.0.2.7", "", "192.0.2.7:8080", True),  # the bound address
    ("192.0.2.7", "", "localhost:8080", True),
    ("192.0.2.7", "", "192.0.2.8:8080", False),
    ("gpu-box.lan", "", "GPU-BOX.lan.:8080", True),
    ("0.0.0.0", "", "sagemaker.internal:8080", True),  # every interface: the container behind SageMaker
    ("::", "", "10.0.3.7:8080", True),
])
def test_host_check_rules(bind: str, token: str, host: str | None, allowed: bool) -> None:
    assert host_allowed(host, token, bind) is allowed


@pytest.mark.parametrize(("bind", "token", "status"), [
    ("127.0.0.1", "", 403),
    ("0.0.0.0", "", 503),  # SageMaker: the health check reaches /ping (503 while loading, then 200)
    ("127.0.0.1", "a-token", 503),
])
def test_ping_behind_sagemaker_is_answered_whatever_its_host(tmp_path: Path, bind: str, token: str,
                                                             status: int) -> None:
    """The container runs bound to 0.0.0.0 without a token, and SageMaker's health check sends a Host of its own."""
    settings = ServerSettings(engine="onnx", models_dir=tmp_path, host=bind, token=token)
    app = create_app(settings)
    app.state.endpoint = EndpointState(settings)  # as during start-up: nothing loaded yet
    client = TestClient(app, base_url="http://10.0.3.7:8080")  # not entered: the lifespan does not run
    assert client.get("/ping").status_code == status
