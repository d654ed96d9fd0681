"""The endpoint's memory stays bounded under abuse: measured as the RSS of a real `python -m voicecli_endpoint`.

One process of this module's own (default limits), sampled from /proc every 20 ms while it is attacked with
oversized chunked bodies, pipelining floods (WebSocket and POST) and clients that never read. Its peak RSS must stay
within RSS_BOUND_MB of what it used after warming up. Before issue 17 a single 300 MB chunked POST raised it by
~600 MB (the body was read whole before the size check).

Never-reading clients are dropped by the keepalive (20 s ping interval + 20 s timeout) while their buffers have room,
or once a send has waited session.SEND_TIMEOUT_S (30 s) for them when the buffers are full, so this
test takes about a minute; it also checks that each drop is logged with its reason (before issue 17: silently).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.conftest import _free_port
from tests.endpoint.helpers import next_control, send_chunked_until_answered, send_json
from tests.endpoint_process import EndpointProcess
from voicecli.wire.protocol import DEFAULTS, Error, ErrorCode, SynthesisComplete

pytestmark = pytest.mark.slow

RSS_BOUND_MB = 50.0
CHUNKED_BODY_BYTES = 300 * 1024 * 1024
LONG_TEXT = ("A sentence long enough to make plenty of audio for a client that will never read any of it. " * 21)[
    : DEFAULTS.limits.max_text_chars]


WARM_TEXT = "Hello. " + " ".join(["and then the long sentence went on"] * 14) + "."
"""A short first sentence, then the longest piece: a turn's first piece is decoded in parts of at most ~2 s
(voicecli_endpoint.engines.decoder_parts), so only a later piece makes the engine decode a long piece whole."""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class PeakRss:
    """Samples a process's RSS in a thread; `peak` is the highest seen."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.peak = rss_mb(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def endpoint(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EndpointProcess]:
    log_path = tmp_path_factory.mktemp("memory") / "server.log"
    process = EndpointProcess(_free_port(), models_dir, log_path).start()
    try:
        yield process
    finally:
        process.stop()


def never_reading_client(port: int, requests: int) -> socket.socket:
    """A raw WebSocket client with a tiny receive buffer that sends `requests` long pcm16 requests and then never
    reads a byte (not even pings: a library client would answer those in the background)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /invocations-bidirectional-stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    response = b""
    while b"\r\n\r\n" not in response:
        response += sock.recv(1)  # byte by byte: nothing after the handshake's end is read
    assert response.startswith(b"HTTP/1.1 101"), response
    for index in range(requests):
        payload = json.dumps({"text": LONG_TEXT, "format": "pcm16", "request_id": index}).encode()
        mask = os.urandom(4)
        header = bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(payload)) + mask
        sock.sendall(header + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
    return sock


async def pipelining_flood(endpoint: EndpointProcess, requests: int) -> int:
    """One session sends `requests` long requests at once; returns how many were refused with queue_full. Then it
    cancels everything and checks that the session still speaks."""
    url = f"ws://127.0.0.1:{endpoint.port}/invocations-bidirectional-stream"
    async with connect(url, max_size=None) as ws:
        for index in range(requests):
            await send_json(ws, {"text": LONG_TEXT, "request_id": f"flood-{index}"})
        await send_json(ws, {"type": "cancel"})
        await send_json(ws, {"text": "Still fine.", "speed": 2.0, "request_id": "after"})
        refused = 0
        while True:  # the cancelled requests get no terminal frame of their own: read up to "after"'s
            message = await next_control(ws)
            if isinstance(message, Error) and message.code == ErrorCode.QUEUE_FULL:
                refused += 1
            if isinstance(message, SynthesisComplete | Error) and message.request_id == "after":
                assert isinstance(message, SynthesisComplete), message
                return refused


def post_flood(endpoint: EndpointProcess, posts: int) -> list[int]:
    """`posts` concurrent long POSTs whose clients give up after 2 s; the status codes that came back in time."""

    def one(_: int) -> int:
        try:
            return httpx.post(f"{endpoint.http_url}/invocations", json={"text": LONG_TEXT}, timeout=2.0).status_code
        except httpx.TimeoutException:
            return 0

    with ThreadPoolExecutor(posts) as pool:
        return list(pool.map(one, range(posts)))


def test_rss_stays_bounded_under_oversized_bodies_floods_and_never_reading_clients(
    endpoint: EndpointProcess, record_property: pytest.RecordProperty
) -> None:
    assert endpoint.process is not None
    pid = endpoint.process.pid
    # Warm up with the longest pieces the chunker makes (one long sentence, not the first: WARM_TEXT): the engine's
    # memory arena grows to the largest input it has seen, which is the working set of normal use, not an effect of
    # abuse.
    for audio_format in ("wav", "mp3"):
        assert httpx.post(f"{endpoint.http_url}/invocations", json={"text": WARM_TEXT, "format": audio_format},
                          timeout=300).status_code == 200
    asyncio.run(pipelining_flood(endpoint, 3))
    time.sleep(1.0)
    baseline = rss_mb(pid)
    with PeakRss(pid) as watch:
        readers = [never_reading_client(endpoint.port, 8) for _ in range(3)]
        with ThreadPoolExecutor(4) as pool:
            chunked = list(pool.map(lambda _: send_chunked_until_answered(endpoint.port, CHUNKED_BODY_BYTES),
                                    range(4)))
        phases = [f"chunked {watch.peak:.0f}"]
        for sent, answer in chunked:
            assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
            assert sent < 16 * 1024 * 1024, f"the server took {sent} bytes of a chunked body before refusing"
        refused = asyncio.run(pipelining_flood(endpoint, 500))
        phases.append(f"WebSocket flood {watch.peak:.0f}")
        assert refused >= 500 - DEFAULTS.limits.max_queued_requests - 1
        codes = post_flood(endpoint, 40)
        phases.append(f"POST flood {watch.peak:.0f}")
        assert codes.count(503) >= 40 - DEFAULTS.limits.max_sessions  # the budget shared with sessions
        # The never-reading clients are dropped by the keepalive or the send timeout (~30-60 s after their handshake).
        deadline = time.monotonic() + 120
        while endpoint.log_text().count("stopped reading") < len(readers):
            assert time.monotonic() < deadline, f"never-reading clients not dropped:\n{endpoint.log_tail()}"
            time.sleep(1.0)
        for sock in readers:
            sock.close()
    grown = watch.peak - baseline
    phases.append(f"never-reading clients {watch.peak:.0f}")
    summary = (f"endpoint RSS: baseline {baseline:.0f} MB, peak under abuse {watch.peak:.0f} MB (+{grown:.0f} MB); "
               f"peak after each phase (MB): {', '.join(phases)}")
    print(summary)
    record_property("rss", summary)
    assert grown < RSS_BOUND_MB, summary
    assert httpx.get(f"{endpoint.http_url}/ping", timeout=30).status_code == 200
    dropped = [line for line in endpoint.log_text().splitlines() if "stopped reading" in line]
    assert len(dropped) == len(readers) and all("WARNING" in line for line in dropped), dropped
