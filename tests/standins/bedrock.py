"""A Bedrock Runtime stand-in: ConverseStream over HTTP/1.1 chunked event-stream on 127.0.0.1 (test equipment).

The real boto3 client is pointed at it with `endpoint_url`, so the tests exercise boto3's request signing,
serialization, event-stream parsing and error handling exactly as against AWS. Each request is served from a
scripted `Reply`; every request is recorded so tests can assert what the client sent.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from tests.standins.eventstream import event, exception
from tests.standins.loopback import ClientGone, LoopbackServer, end_chunks, pause, write_chunk


@dataclass
class Reply:
    """What the stand-in does for one request."""

    deltas: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " stand-in."])
    delay_s: float = 0.005  # pause before each delta
    stop_reason: str = "end_turn"
    usage: tuple[int, int] = (11, 4)  # inputTokens, outputTokens
    # Mid-stream failure: after this many deltas, an exception event (or, with drop=True, a cut connection).
    fail_after: int | None = None
    drop: bool = False
    exception_type: str = "throttlingException"
    exception_message: str = "Too many tokens, please wait before trying again."
    # HTTP-level failure instead of a stream.
    http_status: int = 200
    error_type: str = ""
    error_message: str = ""
    # Hold the delta at this index until `release` is set (or hold_timeout_s passes): lets a test prove that
    # earlier deltas reached it while the stand-in had not yet sent the rest.
    hold_at: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    hold_timeout_s: float = 30.0


def normal(*deltas: str) -> Reply:
    return Reply(deltas=list(deltas)) if deltas else Reply()


def slow(count: int = 40, delay_s: float = 0.05) -> Reply:
    return Reply(deltas=[f" word{i}" for i in range(count)], delay_s=delay_s)


def throttled_mid_stream(after: int = 2) -> Reply:
    return Reply(fail_after=after)


def stream_exception(exception_type: str, message: str, after: int = 1) -> Reply:
    return Reply(fail_after=after, exception_type=exception_type, exception_message=message)


def dropped_mid_stream(after: int = 2) -> Reply:
    return Reply(fail_after=after, drop=True)


def http_error(status: int, error_type: str, message: str) -> Reply:
    return Reply(http_status=status, error_type=error_type, error_message=message)


def throttled_http() -> Reply:
    return http_error(429, "ThrottlingException", "Too many requests, please wait before trying again.")


def access_denied() -> Reply:
    return http_error(403, "AccessDeniedException", "You don't have access to the model with the specified model ID.")


def model_not_enabled() -> Reply:
    return http_error(400, "ValidationException", "The provided model identifier is invalid.")


@dataclass
class ServedRequest:
    """A request the stand-in received, and how far its answer got."""

    path: str
    model_id: str
    headers: dict[str, str]
    body: dict[str, Any]
    client_port: int = 0  # tells whether the client reused its connection
    deltas_sent: int = 0
    last_delta_sent: threading.Event = field(default_factory=threading.Event)
    client_gone: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)


class BedrockStandIn(LoopbackServer):
    """Serves scripted ConverseStream replies; `queue()` sets the next replies, later ones get `default`."""

    def __init__(self) -> None:
        self.default = Reply()
        self.requests: list[ServedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__(self._handler_class())

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._replies.popleft() if self._replies else self.default

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                parts = self.path.split("/")
                model_id = unquote(parts[2]) if len(parts) > 3 and parts[1] == "model" else ""
                served = ServedRequest(
                    self.path, model_id, dict(self.headers.items()), body, client_port=self.client_address[1]
                )
                with stand_in._lock:
                    stand_in.requests.append(served)
                reply = stand_in._next_reply()
                try:
                    if not (parts[-1] == "converse-stream" and model_id):
                        self._error(404, "UnknownOperationException", f"no route for {self.path}")
                    elif reply.http_status != 200:
                        self._error(reply.http_status, reply.error_type, reply.error_message)
                    else:
                        self._stream(reply, served)
                except (ClientGone, BrokenPipeError, ConnectionResetError):
                    served.client_gone.set()
                    self.close_connection = True
                finally:
                    served.finished.set()

            def _error(self, status: int, error_type: str, message: str) -> None:
                payload = json.dumps({"message": message}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header(
                    "x-amzn-ErrorType", f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"
                )
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _pause(self, seconds: float, gate: threading.Event | None = None) -> None:
                pause(self.connection, seconds, gate, stand_in.closing)

            def _stream(self, reply: Reply, served: ServedRequest) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.amazon.eventstream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("x-amzn-RequestId", "standin-0001")
                self.end_headers()
                write_chunk(self, event("messageStart", {"role": "assistant"}))
                for index, text in enumerate(reply.deltas):
                    if reply.fail_after is not None and index == reply.fail_after:
                        if reply.drop:
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        write_chunk(self, exception(reply.exception_type, reply.exception_message))
                        end_chunks(self)
                        return
                    if index == reply.hold_at:
                        self._pause(reply.hold_timeout_s, reply.release)
                    self._pause(reply.delay_s)
                    if index == len(reply.deltas) - 1:
                        served.last_delta_sent.set()
                    write_chunk(self, event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}))
                    served.deltas_sent += 1
                write_chunk(self, event("contentBlockStop", {"contentBlockIndex": 0}))
                write_chunk(self, event("messageStop", {"stopReason": reply.stop_reason}))
                usage = {"inputTokens": reply.usage[0], "outputTokens": reply.usage[1]}
                usage["totalTokens"] = sum(reply.usage)
                write_chunk(self, event("metadata", {"usage": usage, "metrics": {"latencyMs": 42}}))
                end_chunks(self)

        return Handler
