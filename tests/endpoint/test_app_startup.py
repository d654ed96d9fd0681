"""The app before and without a model: /ping and the routes say so instead of hanging or crashing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from voicecli_endpoint.app import ROUTES, EndpointState, ServerSettings, create_app

from voicecli.wire.protocol import Error, parse_server_message
from voicecli.wire.server_options import ServerOptions

LOCAL = "http://127.0.0.1"
"""Where the test client says it is calling: the app, bound to loopback by default and without a token, refuses any
other Host (Starlette's TestClient sends "testserver"; access.host_allowed)."""


def test_declared_routes() -> None:
    paths = {getattr(route, "path", None) for route in ROUTES}
    assert paths == {"/ping", "/invocations", "/v1/audio/speech", "/invocations-bidirectional-stream", "/stats"}


def test_ping_is_503_while_loading(tmp_path: Path) -> None:
    app = create_app(ServerSettings(engine="onnx", models_dir=tmp_path))
    app.state.endpoint = EndpointState(ServerSettings())  # as during start-up: nothing loaded yet
    client = TestClient(app, base_url=LOCAL)  # not entered: the lifespan (and loading) does not run
    assert client.get("/ping").status_code == 503
    response = client.post("/invocations", json={"text": "Hi."})
    assert response.status_code == 503 and response.json()["code"] == "not_ready"
    speech = client.post("/v1/audio/speech", json={"model": "tts-1", "input": "Hi.", "voice": "af_heart"})
    assert speech.status_code == 503 and speech.json()["code"] == "not_ready"


def test_failed_load_is_reported(tmp_path: Path) -> None:
    app = create_app(ServerSettings(engine="onnx", models_dir=tmp_path))
    with TestClient(app, base_url=LOCAL) as client:
        state: EndpointState = app.state.endpoint
        assert client.portal is not None
        client.portal.call(state.ready.wait)
        ping = client.get("/ping")
        assert ping.status_code == 500 and "voicecli models install" in ping.text
        assert client.get("/stats").json()["load_error"]
        with client.websocket_connect("ws://127.0.0.1/invocations-bidirectional-stream") as ws:
            error = parse_server_message(ws.receive_text())
            assert isinstance(error, Error) and error.code == "not_ready"
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
            assert closed.value.code == 1011


def test_the_options_build_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICECLI_ENDPOINT__TOKEN", "from-the-env")
    options = ServerOptions(host="192.0.2.7", engine="onnx", threads=3, models_dir=tmp_path, max_text_chars=10,
                            max_sessions=5, idle_timeout_s=0)
    app = create_app(ServerSettings.from_options(options))
    with TestClient(app):
        settings = app.state.endpoint.settings
    assert (settings.engine, settings.models_dir, settings.workers, settings.threads) == ("onnx", tmp_path, None, 3)
    assert (settings.host, settings.token) == ("192.0.2.7", "from-the-env")
    assert (settings.limits.max_text_chars, settings.limits.max_sessions, settings.limits.idle_timeout_s) == (10, 5, 0)
    assert settings.limits.max_frame_bytes == 64 * 1024
    given = ServerSettings.from_options(dataclasses.replace(options, token=" given "))
    assert given.token == "given"
