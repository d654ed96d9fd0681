"""An OpenAI-compatible chat-completions stand-in: POST /v1/chat/completions with SSE streaming (test equipment).

Scripted per request like the Bedrock stand-in: normal answers, HTTP errors (401/404/429/500), a connection
cut mid-stream, and slow or held deltas for cancellation tests. Requests are recorded for assertions.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.standins.loopback import ClientGone, LoopbackServer, end_chunks, pause, write_chunk


@dataclass
class Reply:
    deltas: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " stand-in."])
    delay_s: float = 0.005
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = (9, 4)  # sent only when the client asked for stream_options.include_usage
    http_status: int = 200
    error_message: str = ""
    drop_after: int | None = None  # cut the connection after this many deltas
    send_done: bool = True
    hold_at: int | None = None
    release: threading.Event = field(default_factory=threading.Event)
    hold_timeout_s: float = 30.0


def http_error(status: int, message: str) -> Reply:
    return Reply(http_status=status, error_message=message)


@dataclass
class ServedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    deltas_sent: int = 0
    last_delta_sent: threading.Event = field(default_factory=threading.Event)
    client_gone: threading.Event = field(default_factory=threading.Event)


class OpenAIStandIn(LoopbackServer):
    """Serves scripted streaming chat completions under /v1."""

    def __init__(self) -> None:
        self.default = Reply()
        self.requests: list[ServedRequest] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        super().__init__(self._handler_class())

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

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
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                served = ServedRequest(self.path, dict(self.headers.items()), body)
                with stand_in._lock:
                    stand_in.requests.append(served)
                reply = stand_in._next_reply()
                try:
                    if self.path != "/v1/chat/completions":
                        self._error(404, f"no route {self.path}")
                    elif reply.http_status != 200:
                        self._error(reply.http_status, reply.error_message)
                    else:
                        self._stream(reply, served)
                except (ClientGone, BrokenPipeError, ConnectionResetError):
                    served.client_gone.set()
                    self.close_connection = True

            def _error(self, status: int, message: str) -> None:
                payload = json.dumps({"error": {"message": message, "type": "standin_error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _data(self, obj: dict[str, Any] | str) -> None:
                text = obj if isinstance(obj, str) else json.dumps(obj)
                write_chunk(self, f"data: {text}\n\n".encode())

            def _chunk_obj(self, model: str, delta: dict[str, str], finish: str | None) -> dict[str, Any]:
                return {
                    "id": "chatcmpl-standin",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }

            def _stream(self, reply: Reply, served: ServedRequest) -> None:
                model = str(served.body.get("model", ""))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._data(self._chunk_obj(model, {"role": "assistant", "content": ""}, None))
                for index, text in enumerate(reply.deltas):
                    if index == reply.drop_after:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    if index == reply.hold_at:
                        pause(self.connection, reply.hold_timeout_s, reply.release, stand_in.closing)
                    pause(self.connection, reply.delay_s, None, stand_in.closing)
                    if index == len(reply.deltas) - 1:
                        served.last_delta_sent.set()
                    self._data(self._chunk_obj(model, {"content": text}, None))
                    served.deltas_sent += 1
                if reply.finish_reason:
                    self._data(self._chunk_obj(model, {}, reply.finish_reason))
                wants_usage = bool(served.body.get("stream_options", {}).get("include_usage"))
                if wants_usage and reply.usage is not None:
                    prompt, completion = reply.usage
                    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
                    usage["total_tokens"] = prompt + completion
                    self._data({"id": "chatcmpl-standin", "choices": [], "usage": usage})
                if reply.send_done:
                    self._data("[DONE]")
                end_chunks(self)

        return Handler
