"""Clients that never finish: stalled POST bodies, request heads that never end, sockets that say nothing.

Issue 25 (medium): 32 sockets that sent the head of a POST with `Content-Length: 1000` and one byte of its body held
all 32 concurrency slots, so every other POST and WebSocket got 503 for as long as they stayed open; and the server
never closed a socket that sent nothing, half a head, or a head a line at a time. Each test replays one such probe
against the session's real server, on raw sockets to 127.0.0.1, and reads that server's log for tracebacks.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import httpx
import pytest
from voicecli_endpoint.connections import BODY_TIMEOUT_S, KEEP_ALIVE_TIMEOUT_S, REQUEST_HEAD_TIMEOUT_S
from websockets.asyncio.client import connect

from tests.conftest import RunningServer
from voicecli.wire.protocol import DEFAULTS, ErrorCode

pytestmark = pytest.mark.slow

MARGIN_S = 8.0
"""Slack on every deadline for a loaded 2-core machine; the bound each wait gives up at is deadline + margin."""
STALLED_HEAD = (b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n{")
"""A POST that declares 1000 bytes of body and sends one."""


def log_offset(server: RunningServer) -> int:
    return server.log_path.stat().st_size


def log_since(server: RunningServer, offset: int) -> str:
    with server.log_path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")


def assert_no_error_logged(server: RunningServer, offset: int) -> None:
    text = log_since(server, offset)
    bad = [line for line in text.splitlines() if "Traceback" in line or " ERROR " in line]
    assert not bad, "the server logged errors for a client's behaviour:\n" + text[-3000:]


async def read_until_closed(reader: asyncio.StreamReader, bound_s: float) -> tuple[float | None, bytes]:
    """Everything the server sends until it closes the connection: (seconds it took, the bytes), or (None, the bytes
    so far) when it was still open after `bound_s`."""
    started = time.monotonic()
    data = b""
    while (left := bound_s - (time.monotonic() - started)) > 0:
        try:
            chunk = await asyncio.wait_for(reader.read(4096), left)
        except TimeoutError:
            break
        except ConnectionError:
            return time.monotonic() - started, data
        if not chunk:
            return time.monotonic() - started, data
        data += chunk
    return None, data


async def stalled_post(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
    writer.write(STALLED_HEAD)
    await writer.drain()
    return reader, writer


async def test_stalled_post_bodies_hold_no_slot_and_are_answered_408(server: RunningServer) -> None:
    """Before the fix: 32 stalled bodies took all 32 slots (a POST and a handshake got 503) and were never closed."""
    offset = log_offset(server)
    count = DEFAULTS.limits.max_sessions
    stalled = [await stalled_post(server.port) for _ in range(count)]
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            assert (await client.get(f"{server.http_url}/ping")).status_code == 200  # the heads above were read
            await asyncio.sleep(0.5)
            stats = (await client.get(f"{server.http_url}/stats")).json()
            assert stats["active_requests"] == 0, "stalled bodies hold concurrency slots"
            response = await client.post(f"{server.http_url}/invocations", json={"text": "Hi.", "speed": 2.0})
            assert response.status_code == 200, response.text[:200]
        async with connect(server.ws_url) as ws:
            await ws.ping()
        answers = await asyncio.gather(*(read_until_closed(reader, BODY_TIMEOUT_S + MARGIN_S)
                                         for reader, _ in stalled))
        elapsed = time.monotonic() - started
    finally:
        for _, writer in stalled:
            writer.close()
    assert all(closed is not None for closed, _ in answers), "stalled sockets left open"
    assert elapsed < BODY_TIMEOUT_S + MARGIN_S
    for _, data in answers:
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), data[:200]
        assert b"connection: close" in head.lower()
        error = json.loads(body)
        assert error["code"] == ErrorCode.IDLE_TIMEOUT and f"{BODY_TIMEOUT_S:g} s" in error["message"]
    assert httpx.get(f"{server.http_url}/stats", timeout=30).json()["active_requests"] == 0
    assert_no_error_logged(server, offset)


async def test_a_client_that_leaves_mid_body_logs_no_traceback(server: RunningServer) -> None:
    """Before the fix the disconnect surfaced as `validating the body failed` with a ClientDisconnect traceback."""
    offset = log_offset(server)
    _, writer = await stalled_post(server.port)
    await asyncio.sleep(0.5)
    writer.close()
    await writer.wait_closed()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = log_since(server, offset)
        if "went away while sending its body" in text or "Traceback" in text:
            break
        await asyncio.sleep(0.2)
    assert_no_error_logged(server, offset)
    assert "went away while sending its body" in log_since(server, offset)


async def dribble(writer: asyncio.StreamWriter, bound_s: float) -> None:
    """One header line a second, never the blank line that ends the head, until the server closes or `bound_s`."""
    started, line = time.monotonic(), 0
    while time.monotonic() - started < bound_s and not writer.is_closing():
        try:
            writer.write(f"X-Drip-{line}: 1\r\n".encode())
            await writer.drain()
        except ConnectionError:
            return
        line += 1
        await asyncio.sleep(1.0)


UNFINISHED = {
    "silent": b"",
    "half a head": b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    "half a WebSocket handshake": b"GET /invocations-bidirectional-stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  b"Upgrade: websocket\r\nConnection: Upgrade\r\n",
    "a head a line a second": b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n",
    "idle after a response": b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
}


async def test_connections_that_never_finish_a_request_are_closed(server: RunningServer) -> None:
    """Before the fix only the last (uvicorn's keep-alive timer) was ever closed; the others stayed open for good.

    The deadline is a total from when the wait began: the dribbled head is cut although a byte arrives every second.
    """
    offset = log_offset(server)
    bound_s = REQUEST_HEAD_TIMEOUT_S + MARGIN_S

    async def probe(name: str, data: bytes) -> float | None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", server.port), 30)
        try:
            writer.write(data)
            await writer.drain()
            dripping = asyncio.create_task(dribble(writer, bound_s)) if name == "a head a line a second" else None
            closed, answer = await read_until_closed(reader, bound_s)
            if dripping is not None:
                dripping.cancel()
            if name == "idle after a response":
                assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            else:
                assert answer == b"", answer[:200]  # no request head: nothing to answer
            return closed
        finally:
            writer.close()

    closed = dict(zip(UNFINISHED, await asyncio.gather(*(probe(n, d) for n, d in UNFINISHED.items())), strict=True))
    assert all(seconds is not None for seconds in closed.values()), f"left open after {bound_s:g} s: {closed}"
    for name, seconds in closed.items():
        deadline = KEEP_ALIVE_TIMEOUT_S if name == "idle after a response" else REQUEST_HEAD_TIMEOUT_S
        assert seconds is not None and deadline - 1 <= seconds <= deadline + MARGIN_S, (name, seconds)
    assert httpx.get(f"{server.http_url}/ping", timeout=30).status_code == 200
    assert_no_error_logged(server, offset)


def test_a_slow_body_that_does_arrive_in_time_is_served(server: RunningServer) -> None:
    """The body deadline is for stalled clients only: a body sent in three parts a second apart is answered."""
    body = json.dumps({"text": "Hi.", "speed": 2.0}).encode()

    def slow() -> Iterator[bytes]:
        for part in (body[:5], body[5:10], body[10:]):
            time.sleep(1.0)
            yield part

    response = httpx.post(f"{server.http_url}/invocations", content=slow(), headers={"Content-Length": str(len(body))},
                          timeout=120)
    assert response.status_code == 200 and response.content[:4] == b"RIFF"

