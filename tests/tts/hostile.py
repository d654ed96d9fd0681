"""A hostile stand-in for the endpoint's WebSocket route, served for real on 127.0.0.1 (test equipment).

Why: the client used to trust whatever the endpoint sent (a 100 MB message, audio that never ends, frames out of
order, connections accepted and dropped at once). The tests replay each of those against the real transports and the
real `voicecli say`, over a real socket, so what is checked is what a misbehaving endpoint would do to a user.

Each connection runs the test's script (`Script`) with a `Session`: the requests the client sent, in order, and the
means to answer them, honestly (`answer`) or not. GET /ping answers 200, so `voicecli say --endpoint` (which also
connects the batch transport) can be pointed at it. Everything the client sent is kept in `received`, with the index
of the connection it came on. Every stream a script sends is bounded (`messages`), and the server stops with the test.

`HostileHttp` is the same for POST /invocations (the batch transport): each answer as many seconds of MP3 as the test
says, chunked, with the endpoint's timing headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from types import TracebackType
from typing import Any, Self

import numpy as np
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from tests.standins.loopback import LoopbackServer, end_chunks, write_chunk
from voicecli.audio.mp3_frames import split_frames
from voicecli.wire.protocol import (
    PING_PATH,
    SAMPLE_RATE,
    CancelAck,
    SynthesisComplete,
    SynthesisStart,
    Timings,
    encode_message,
)

MESSAGE_BYTES = 32 * 1024
"""What the real endpoint groups its MP3 frames into (voicecli_endpoint.audio_encoding.DEFAULT_MAX_MESSAGE_BYTES)."""
FRAME_S = 576 / SAMPLE_RATE
"""One MPEG-2 Layer III frame at 24 kHz: 24 ms."""


@cache
def mp3_frames() -> tuple[bytes, ...]:
    """10 s of a 440 Hz tone as the endpoint encodes it (64 kbps, whole frames, no Info frame). Cycling through them
    from the first one keeps every frame's bit reservoir valid, so any length of it decodes."""
    from voicecli_endpoint.audio_encoding import mp3_bytes

    t = np.arange(10 * SAMPLE_RATE) / SAMPLE_RATE
    frames, rest = split_frames(mp3_bytes((0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)))
    assert not rest
    return tuple(frames)


def messages(seconds: float, size: int = MESSAGE_BYTES) -> Iterator[bytes]:
    """`seconds` of MP3 (rounded to whole frames) as binary messages of whole frames of at most `size` bytes."""
    frames = mp3_frames()
    message = bytearray()
    for index in range(round(seconds / FRAME_S)):
        frame = frames[index % len(frames)]
        if message and len(message) + len(frame) > size:
            yield bytes(message)
            message = bytearray()
        message += frame
    if message:
        yield bytes(message)


def start(rid: str) -> str:
    return encode_message(SynthesisStart(rid, "mp3", SAMPLE_RATE))


def complete(rid: str, audio_s: float = 0.0) -> str:
    return encode_message(SynthesisComplete(rid, Timings(0.0, 1.0, 0.0, audio_s), 0.01))


@dataclass
class Session:
    """One connection as a script sees it."""

    ws: ServerConnection
    index: int
    """0 for the first connection, 1 for the next..."""
    endpoint: HostileEndpoint
    requests: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    cancelled: set[str] = field(default_factory=set)

    async def request(self) -> str:
        """The id of the next synthesis request the client sent on this connection."""
        return await self.requests.get()

    async def send(self, *frames: str | bytes) -> None:
        for frame in frames:
            await self.ws.send(frame)

    async def answer(self, rid: str, seconds: float = 0.5) -> None:
        """What the real endpoint does: start, the audio in messages of whole frames, complete."""
        await self.stream(rid, seconds)

    async def stream(self, rid: str, seconds: float, size: int = MESSAGE_BYTES) -> bool:
        """Start, up to `seconds` of audio, complete; stops at the client's cancel of `rid` (acknowledged, as the
        endpoint does) and then returns False."""
        await self.ws.send(start(rid))
        for message in messages(seconds, size):
            if rid in self.cancelled:
                await self.ws.send(encode_message(CancelAck(rid, (rid,))))
                return False
            await self.ws.send(message)
        await self.ws.send(complete(rid, seconds))
        return True

    async def _read(self) -> None:
        async for frame in self.ws:
            message: dict[str, Any] = json.loads(frame)
            self.endpoint.received.append((self.index, message))
            kind = message.get("type", "synthesize")
            if kind == "synthesize":
                self.requests.put_nowait(str(message["request_id"]))
            elif kind == "cancel":
                self.cancelled.add(str(message["request_id"]))


Script = Callable[[Session], Awaitable[None]]
"""What the endpoint does on one connection; returning closes it (code 1000)."""


async def honest(session: Session) -> None:
    """Answers every request as the real endpoint would (half a second of audio each)."""
    while True:
        await session.answer(await session.request())


class HostileEndpoint:
    """`async with HostileEndpoint(script) as endpoint:` serves `script` on every connection until the block ends."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.received: list[tuple[int, dict[str, Any]]] = []
        """(connection index, message) of everything the client sent, in order."""
        self.connections = 0
        self._server: Server | None = None
        self.port = 0

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def sent(self, kind: str = "synthesize") -> list[tuple[int, str]]:
        """(connection index, request_id) of the messages of one type the client sent."""
        return [(index, str(message.get("request_id"))) for index, message in self.received
                if message.get("type", "synthesize") == kind]

    async def __aenter__(self) -> Self:
        self._server = await serve(self._connection, "127.0.0.1", 0, process_request=_ping)
        self.port = next(iter(self._server.sockets)).getsockname()[1]
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.stop()
        if self._server is not None:
            await asyncio.wait_for(self._server.wait_closed(), 10)

    def stop(self) -> None:
        """Stop listening and close every connection (a script may call it): from now on nothing answers."""
        if self._server is not None:
            self._server.close()

    async def _connection(self, ws: ServerConnection) -> None:
        """Run the script while reading what the client sends; whichever ends first (the script returns, or the
        client's side closes) ends the other."""
        session = Session(ws, self.connections, self)
        self.connections += 1
        tasks = {asyncio.create_task(session._read()), asyncio.create_task(self.script(session))}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                    await task


def _ping(connection: ServerConnection, request: Request) -> Response | None:
    """GET /ping is 200, as the real endpoint's (the batch transport checks it at connect)."""
    if request.path == PING_PATH:
        return connection.respond(HTTPStatus.OK, "OK\n")
    return None


class HostileHttp:
    """`with HostileHttp(1200.0) as endpoint:` answers the first POST /invocations with 1200 s of MP3 (chunked, as the
    endpoint streams), every later one with half a second; `bodies` keeps what the client posted."""

    def __init__(self, *seconds: float) -> None:
        self.seconds = list(seconds)
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handler_class())

    @property
    def url(self) -> str:
        return self._server.url

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.stop()

    def _next(self, body: bytes) -> float:
        with self._lock:
            self.bodies.append(body)
            return self.seconds.pop(0) if self.seconds else 0.5

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200 if self.path == PING_PATH else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                seconds = endpoint._next(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                self.send_response(200)
                self.send_header("Content-Type", "audio/mpeg")
                self.send_header("Transfer-Encoding", "chunked")
                for name, value in (("X-Inference-Time-Ms", "12.5"), ("X-Queue-Wait-Ms", "3.0"),
                                    ("X-Audio-Seconds", f"{seconds:.3f}"), ("X-RTF", "0.1")):
                    self.send_header(name, value)
                self.end_headers()
                try:
                    for message in messages(seconds):
                        write_chunk(self, message)
                    end_chunks(self)
                except (BrokenPipeError, ConnectionResetError):  # the client hung up: what a limit does
                    self.close_connection = True

        return Handler
