"""The locked-down endpoint: bearer token, session and queue limits, idle timeout, loopback bind, clean logs.

One endpoint process of this module's own (the shared session `server` has no token and default limits), started
with a token and AWS-looking credentials in its environment and debug logging, so the last test can prove that
none of them reaches the log even when every handshake header is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from voicecli_endpoint.access import bearer_matches
from voicecli_endpoint.log_redaction import REDACTED, redact
from voicecli_endpoint.server import exposure_warning
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from tests.conftest import RunningServer, _free_port
from tests.endpoint.helpers import next_control, read_answers, send_json
from tests.endpoint_process import EndpointProcess
from voicecli.wire.protocol import ErrorCode, SynthesisStart

pytestmark = pytest.mark.slow

TOKEN = "tok-7Hq2-locked-endpoint-secret"
AWS_KEY_ID = "AKIAFAKEACCESSKEY7Q2Z"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKESECRET"
AWS_SESSION = "FwoGZXIvYXdzEFAKESESSIONTOKENvalue1234567890"
MAX_SESSIONS = 2
MAX_QUEUED = 2
IDLE_S = 3.0
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def locked(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EndpointProcess]:
    log_path = tmp_path_factory.mktemp("locked") / "server.log"
    env = {"VOICECLI_ENDPOINT__TOKEN": TOKEN, "AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
           "AWS_SESSION_TOKEN": AWS_SESSION}
    args = ["--max-sessions", str(MAX_SESSIONS), "--max-queued-requests", str(MAX_QUEUED),
            "--idle-timeout-s", str(IDLE_S), "--log-level", "debug"]
    endpoint = EndpointProcess(_free_port(), models_dir, log_path, args, env).start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


def ws_url(endpoint: EndpointProcess) -> str:
    return f"ws://127.0.0.1:{endpoint.port}/invocations-bidirectional-stream"


@contextlib.asynccontextmanager
async def session(endpoint: EndpointProcess) -> AsyncIterator[ClientConnection]:
    async with connect(ws_url(endpoint), additional_headers=AUTH, max_size=None) as ws:
        yield ws


async def refused(endpoint: EndpointProcess, headers: dict[str, str]) -> InvalidStatus:
    with pytest.raises(InvalidStatus) as info:
        async with connect(ws_url(endpoint), additional_headers=headers):
            pass
    return info.value


def test_bearer_check_is_exact() -> None:
    assert bearer_matches(None, "")  # no token configured: open
    assert bearer_matches("Bearer abc", "abc") and bearer_matches("bearer  abc ", "abc")
    for header in (None, "", "Bearer", "Bearer abd", "Bearer abcd", "Basic abc", "abc"):
        assert not bearer_matches(header, "abc"), header


def test_redaction_blanks_bearer_credentials_and_known_secrets() -> None:
    assert redact("< authorization: Bearer xyz123", []) == f"< authorization: Bearer {REDACTED}"
    assert redact(f"key={AWS_SECRET}!", [AWS_SECRET]) == f"key={REDACTED}!"


def test_ping_stays_open_without_a_token(locked: EndpointProcess) -> None:
    assert httpx.get(f"{locked.http_url}/ping", timeout=10).status_code == 200


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-the-token-9x"}, {"Authorization": TOKEN}])
def test_post_without_the_right_token_is_401(locked: EndpointProcess, headers: dict[str, str]) -> None:
    response = httpx.post(f"{locked.http_url}/invocations", json={"text": "Hello."}, headers=headers, timeout=60)
    assert response.status_code == 401
    body = response.json()
    assert body["code"] == ErrorCode.UNAUTHORIZED and "endpoint.token" in body["message"]
    assert TOKEN not in response.text


def test_openai_route_takes_the_token_as_its_api_key(locked: EndpointProcess) -> None:
    body = {"model": "tts-1", "input": "Hello.", "voice": "af_heart", "stream": False}
    refused = httpx.post(f"{locked.http_url}/v1/audio/speech", json=body, timeout=60,
                         headers={"Authorization": "Bearer sk-some-openai-key"})
    assert refused.status_code == 401 and refused.json()["code"] == ErrorCode.UNAUTHORIZED
    response = httpx.post(f"{locked.http_url}/v1/audio/speech", json=body, headers=AUTH, timeout=120)
    assert response.status_code == 200 and response.content[:1] == b"\xff"


def test_post_with_the_token_synthesizes(locked: EndpointProcess) -> None:
    response = httpx.post(f"{locked.http_url}/invocations", json={"text": "Hello.", "format": "mp3"},
                          headers=AUTH, timeout=120)
    assert response.status_code == 200 and response.content[:1] == b"\xff"


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-the-token-9x"}])
async def test_websocket_without_the_right_token_is_refused_at_the_handshake(
    locked: EndpointProcess, headers: dict[str, str]
) -> None:
    error = await refused(locked, headers)
    assert error.response.status_code == 401
    body = json.loads(bytes(error.response.body))
    assert body["code"] == ErrorCode.UNAUTHORIZED and "endpoint.token" in body["message"]


async def test_websocket_with_the_token_synthesizes(locked: EndpointProcess) -> None:
    async with session(locked) as ws:
        await send_json(ws, {"text": "Hello there.", "request_id": 1})
        received = await read_answers(ws, 1)
        assert received.answers[0].complete is not None and received.answers[0].audio


async def test_one_session_over_the_limit_is_refused_with_a_reason(locked: EndpointProcess) -> None:
    async with session(locked) as first, session(locked) as second:
        error = await refused(locked, AUTH)
        assert error.response.status_code == 503
        body = json.loads(bytes(error.response.body))
        assert body["code"] == ErrorCode.TOO_MANY_SESSIONS and str(MAX_SESSIONS) in body["message"]
        await first.ping()
        await second.ping()  # the admitted sessions are unaffected
    for _ in range(100):  # the server frees the slots once it has seen the disconnects
        stats = httpx.get(f"{locked.http_url}/stats", timeout=10).json()
        if stats["active_sessions"] == 0:
            break
        await asyncio.sleep(0.05)
    async with session(locked) as again:
        await again.ping()


async def test_one_request_over_the_queue_limit_gets_queue_full_and_the_session_goes_on(
    locked: EndpointProcess,
) -> None:
    async with session(locked) as ws:
        await send_json(ws, {"text": "A first sentence keeps the engine busy for a moment, with a few more words.",
                             "request_id": "busy"})
        start = await next_control(ws)
        assert isinstance(start, SynthesisStart) and start.request_id == "busy"  # "busy" is no longer queued
        for rid in ["q1", "q2", "over"]:
            await send_json(ws, {"text": "Short one.", "request_id": rid})
        received = await read_answers(ws, 3, started=start)
        assert [a.request_id for a in received.answers] == ["busy", "q1", "q2"]
        assert all(a.complete is not None for a in received.answers)
        refusals = [m for m in received.others if getattr(m, "code", None) == ErrorCode.QUEUE_FULL]
        assert len(refusals) == 1 and refusals[0].request_id == "over"
        await send_json(ws, {"text": "Still here.", "request_id": "after"})
        assert (await read_answers(ws, 1)).answers[0].complete is not None


async def test_an_idle_session_is_closed_with_a_reason(locked: EndpointProcess) -> None:
    async with session(locked) as ws:
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), IDLE_S * 20)
        close = info.value.rcvd
        assert close is not None and close.code == 1000 and close.reason.startswith(ErrorCode.IDLE_TIMEOUT)


async def test_a_session_busy_with_a_long_request_is_not_idle(locked: EndpointProcess) -> None:
    text = " ".join(["This sentence is one of many that make the request last longer than the idle timeout."] * 6)
    async with session(locked) as ws:
        await send_json(ws, {"text": text, "request_id": "long"})
        answer = (await read_answers(ws, 1)).answers[0]
        assert answer.complete is not None
        if answer.complete.elapsed_s <= IDLE_S:
            pytest.skip(f"synthesis took only {answer.complete.elapsed_s:.1f} s: too fast to outlast the timeout")


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))  # UDP: no packet is sent, it only picks the outgoing interface
            address: str = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_default_bind_is_loopback_only(locked: EndpointProcess) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to probe from")
    with socket.socket() as sock:
        sock.settimeout(5)
        assert sock.connect_ex((address, locked.port)) != 0, f"endpoint reachable on {address}"


async def test_logs_never_contain_the_token_or_credentials(locked: EndpointProcess) -> None:
    """Runs a refused and an accepted handshake and POST itself, then reads the debug log."""
    await refused(locked, {"Authorization": "Bearer not-the-token-9x"})
    async with session(locked) as ws:
        await ws.ping()
    httpx.post(f"{locked.http_url}/invocations", json={"text": "Hi."}, headers=AUTH, timeout=120)
    log = locked.log_text()
    assert "authorization: Bearer [redacted]" in log.replace("Authorization", "authorization")  # headers logged
    assert "bearer token required" in log
    for secret in (TOKEN, AWS_KEY_ID, AWS_SECRET, AWS_SESSION, "not-the-token-9x"):
        assert secret not in log, f"{secret[:4]}... appears in the endpoint log"


async def test_client_transport_explains_a_refused_token(locked: EndpointProcess) -> None:
    from voicecli.tts.base import TransportError
    from voicecli.tts.websocket import WebSocketTransport

    transport = WebSocketTransport(f"http://127.0.0.1:{locked.port}", token="wrong")
    with pytest.raises(TransportError) as info:
        await transport.connect()
    message = str(info.value)
    assert "HTTP 401" in message and "endpoint.token" in message and "is the endpoint running" not in message


async def test_client_reopens_an_idle_closed_session_only_when_needed(locked: EndpointProcess) -> None:
    from voicecli.tts.base import AudioDone, SpeechRequest
    from voicecli.tts.websocket import WebSocketTransport

    transport = WebSocketTransport(f"http://127.0.0.1:{locked.port}", token=TOKEN)
    await transport.connect()
    try:
        await asyncio.sleep(IDLE_S * 3)  # the endpoint closes the idle session ...
        assert transport.reconnects == 0  # ... and the client does not hold a slot by reconnecting at once
        await transport.send(SpeechRequest("after-idle", "Hello again."))
        while not isinstance(event := await transport.next_event(120), AudioDone):
            pass
        assert event.request_id == "after-idle" and transport.reconnects == 1
    finally:
        await transport.aclose()


# ---------------------------------------------------------------------------------------------------- hardening
# (issue 17: one concurrency budget for sessions and POSTs; browser safety; quiet, clear logs)


def test_open_sessions_and_posts_share_one_budget_answered_with_503_and_retry_after(locked: EndpointProcess) -> None:
    """Before the fix POSTs had no limit at all: forty concurrent ones were all queued."""

    async def scenario() -> None:
        async with session(locked) as first, session(locked) as second:
            response = httpx.post(f"{locked.http_url}/invocations", json={"text": "Hi."}, headers=AUTH, timeout=60)
            assert response.status_code == 503 and response.headers["retry-after"] == "5"
            assert response.json()["code"] == ErrorCode.TOO_MANY_SESSIONS
            await first.ping()
            await second.ping()
        # One session and one long POST fill the budget of two: a handshake is refused meanwhile.
        async with session(locked), httpx.AsyncClient(timeout=120) as client:
            text = " ".join(["A long sentence that keeps this request busy for a while."] * 6)
            post = asyncio.create_task(client.post(f"{locked.http_url}/invocations", json={"text": text},
                                                   headers=AUTH))
            for _ in range(200):
                if (await client.get(f"{locked.http_url}/stats")).json()["active_requests"] == 1:
                    break
                await asyncio.sleep(0.05)
            error = await refused(locked, AUTH)
            assert error.response.status_code == 503
            assert (await post).status_code == 200
        stats = httpx.get(f"{locked.http_url}/stats", timeout=10).json()
        assert stats["refused_requests"] >= 1 and stats["active_requests"] == 0

    asyncio.run(scenario())


EVIL_ORIGIN = "http://attacker.example"


async def test_a_token_less_server_refuses_web_pages_from_elsewhere(server: RunningServer) -> None:
    """Before the fix any web page could drive a token-less local endpoint from the user's browser."""
    with pytest.raises(InvalidStatus) as info:
        async with connect(server.ws_url, origin=Origin(EVIL_ORIGIN)):
            pass
    assert info.value.response.status_code == 403
    assert json.loads(bytes(info.value.response.body))["code"] == ErrorCode.FORBIDDEN_ORIGIN
    response = httpx.post(f"{server.http_url}/invocations", json={"text": "Hi."}, headers={"Origin": EVIL_ORIGIN},
                          timeout=60)
    assert response.status_code == 403 and response.json()["code"] == ErrorCode.FORBIDDEN_ORIGIN
    async with connect(server.ws_url, origin=Origin("http://localhost:5173")) as ws:  # a page of this machine
        await ws.ping()
    async with connect(server.ws_url) as ws:  # a program: no Origin at all
        await ws.ping()


async def test_with_a_token_the_origin_is_not_checked(locked: EndpointProcess) -> None:
    async with connect(ws_url(locked), additional_headers=AUTH, origin=Origin(EVIL_ORIGIN)) as ws:
        await ws.ping()


REBOUND_HOST = "rebound.attacker.example"
"""A DNS-rebinding page's own domain, made to resolve to 127.0.0.1: the Host its requests carry."""


def _handshake(http_url: str, headers: dict[str, str]) -> httpx.Response:
    """A WebSocket handshake sent with httpx, so its Host can be chosen (websockets' client sets its own)."""
    return httpx.get(f"{http_url}/invocations-bidirectional-stream", timeout=30, headers={
        "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13", **headers})


def test_a_token_less_server_answers_no_request_addressed_to_another_host(server: RunningServer) -> None:
    """Issue 25: before the fix a rebinding page read /stats and /ping (200) and reached every route."""
    log_offset = server.log_path.stat().st_size
    before = httpx.get(f"{server.http_url}/stats", timeout=30).json().get("refused_host", 0)
    for host in (REBOUND_HOST, f"{REBOUND_HOST}:{server.port}", f"127.0.0.1.{REBOUND_HOST}:{server.port}"):
        headers = {"Host": host}
        for path in ("/ping", "/ping?details=1", "/stats"):
            response = httpx.get(f"{server.http_url}{path}", headers=headers, timeout=30)
            assert response.status_code == 403, (host, path, response.text[:200])
            assert response.json()["code"] == ErrorCode.FORBIDDEN_ORIGIN and "host" in response.json()["message"]
        post = httpx.post(f"{server.http_url}/invocations", json={"text": "Hi."}, headers=headers, timeout=60)
        assert post.status_code == 403 and post.json()["code"] == ErrorCode.FORBIDDEN_ORIGIN
        handshake = _handshake(server.http_url, headers)
        assert handshake.status_code == 403 and handshake.json()["code"] == ErrorCode.FORBIDDEN_ORIGIN
    assert httpx.get(f"{server.http_url}/stats", timeout=30).json()["refused_host"] >= before + 15
    with server.log_path.open("rb") as log:
        log.seek(log_offset)
        lines = log.read().decode(errors="replace").splitlines()
    assert not [line for line in lines if " ERROR " in line or line.startswith("Traceback")], "\n".join(lines[-40:])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST.", "[::1]", "127.0.0.1:{port}",
                                  "localhost:{port}", "[::1]:{port}"])
def test_a_token_less_server_answers_requests_addressed_to_a_loopback_name(server: RunningServer, host: str) -> None:
    headers = {"Host": host.format(port=server.port)}
    assert httpx.get(f"{server.http_url}/ping", headers=headers, timeout=30).status_code == 200
    assert httpx.get(f"{server.http_url}/stats", headers=headers, timeout=30).status_code == 200
    assert _handshake(server.http_url, headers).status_code == 101


def test_with_a_token_any_host_is_served(locked: EndpointProcess) -> None:
    """SageMaker and reverse proxies send their own Host: with a token the token is the guard."""
    headers = {"Host": f"{REBOUND_HOST}:443"}
    assert httpx.get(f"{locked.http_url}/ping", headers=headers, timeout=30).status_code == 200
    assert httpx.get(f"{locked.http_url}/stats", headers=headers, timeout=30).status_code == 200
    response = httpx.post(f"{locked.http_url}/invocations", json={"text": "Hi."}, headers={**headers, **AUTH},
                          timeout=120)
    assert response.status_code == 200


def test_a_token_less_bind_beyond_loopback_warns() -> None:
    assert exposure_warning("127.0.0.1", "") is None and exposure_warning("localhost", "") is None
    assert exposure_warning("0.0.0.0", "secret-token") is None
    warning = exposure_warning("0.0.0.0", "")
    assert warning is not None and "NO bearer token" in warning and "VOICECLI_ENDPOINT__TOKEN" in warning


async def test_refused_handshakes_log_no_error_traceback(locked: EndpointProcess) -> None:
    await refused(locked, {"Authorization": "Bearer not-the-token-9x"})
    async with session(locked) as first, session(locked) as second:
        await refused(locked, AUTH)
        await first.ping()
        await second.ping()
    await asyncio.sleep(0.5)
    lines = locked.log_text().splitlines()
    assert not [line for line in lines if "ERROR" in line or line.startswith("Traceback")], locked.log_tail()
