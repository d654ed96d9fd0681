"""Shared plumbing for the HTTP stand-ins: a threaded HTTP/1.1 server on 127.0.0.1 and hang-up detection.

Stand-ins stream slowly on purpose; while they pause they watch the socket so a test can tell that the client
hung up (barge-in) instead of guessing from timings.
"""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


class ClientGone(Exception):
    """The client closed its side of the connection."""


def pause(conn: socket.socket, seconds: float, gate: threading.Event | None, closing: threading.Event) -> None:
    """Wait `seconds` (or until `gate` is set, if given) while watching `conn`; raise ClientGone on EOF."""
    deadline = time.monotonic() + seconds
    while not closing.is_set():
        if gate is not None and gate.is_set():
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        readable, _, _ = select.select([conn], [], [], min(0.02, remaining))
        if readable:
            try:
                peeked = conn.recv(1, socket.MSG_PEEK)
            except OSError as exc:
                raise ClientGone from exc
            if not peeked:
                raise ClientGone


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up mid-request are what several tests do on purpose (barge-in): not worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Runs a request handler class on an ephemeral loopback port in a daemon thread."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.closing = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def write_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    """One HTTP/1.1 chunk, flushed so the client sees it now."""
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()


def end_chunks(handler: BaseHTTPRequestHandler) -> None:
    handler.wfile.write(b"0\r\n\r\n")
    handler.wfile.flush()
