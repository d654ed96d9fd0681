"""How long the server waits on a client's connection when no request of it is being answered.

Why: uvicorn (0.54, h11) arms its only timer, ``timeout_keep_alive``, after a connection's response is complete,
and any byte received disarms it for good. It has no timer for a request head at all: a socket that connected and
sent nothing, or sent its head a line at a time, or sent half a WebSocket handshake, stayed open for as long as its
client liked. ``h11_max_incomplete_event_size`` bounds the head's size, not its time. So the protocol below adds
the missing deadline, and serve() hands uvicorn every other bound explicitly (``uvicorn_options``):

* a request head must be complete REQUEST_HEAD_TIMEOUT_S after the connection opened or its previous response
  ended, however it trickles in (a total, not reset by each byte); else the connection is closed;
* an idle keep-alive connection is closed KEEP_ALIVE_TIMEOUT_S after its last response (uvicorn's own timer);
* a request head is at most MAX_REQUEST_HEAD_BYTES (h11 answers 400 beyond);
* an open WebSocket is pinged every WS_PING_INTERVAL_S and closed when no pong came within WS_PING_TIMEOUT_S,
  which is what ends a session whose client vanished without a FIN (a half-open socket);
* a POST's whole body must arrive BODY_TIMEOUT_S after its head; the app times it, since only the app knows it
  waits for a body, and answers 408 ``idle_timeout`` (Connection: close).

uvicorn's ``limit_concurrency`` is deliberately not set: it counts every open connection, stalled ones included,
and answers with a plain-text 503, so a handful of idle sockets would turn real clients away again. The app's own
budget (admission.py) counts only requests and sessions being served.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

REQUEST_HEAD_TIMEOUT_S: Final = 10.0
"""Time for a whole request head (the WebSocket handshake's included) to arrive: a local client or SageMaker sends
it in one packet; 10 s leaves room for a loaded machine and a slow link."""
KEEP_ALIVE_TIMEOUT_S: Final = 5
"""An idle keep-alive connection's life after its last response (uvicorn's default, stated)."""
MAX_REQUEST_HEAD_BYTES: Final = 16 * 1024
"""Largest request head (h11's default, stated here so that it is a decision): what a half-sent head may hold in
memory until its deadline; voicecli's own heads are a few hundred bytes."""
BODY_TIMEOUT_S: Final = 10.0
"""Time for a POST's whole body to arrive once its head did (app._read_body). A body is at most max_frame_bytes
(64 KiB), which even a slow link sends in seconds, and SageMaker and voicecli send it with the head. Without it a
client could declare a length and never send it, holding a connection (and, while the app took a concurrency slot
before reading the body, that slot) for as long as it liked."""
WS_PING_INTERVAL_S: Final = 20.0
WS_PING_TIMEOUT_S: Final = 20.0
"""A WebSocket peer that answers no ping for this long after it was sent is gone: the session is closed (1011)."""


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline on the wait for a client while none of its requests is being answered.

    The deadline runs while the connection waits for a request head (h11's client state IDLE: just opened, or its
    previous response complete) and while the client still sends the body of a request already answered early (a
    413 or 401 sent before the body was read). It starts when that wait starts and is not pushed back by the bytes
    that trickle in; it stops once a whole head arrived (a request is being answered, or the connection became a
    WebSocket, whose protocol takes over the socket). When it expires the connection is closed, with no answer: h11
    has no request to answer yet.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._follow_the_wait()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow_the_wait()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow_the_wait()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        super().connection_lost(exc)

    def _waiting_on_client(self) -> bool:
        if self.transport.is_closing():
            return False
        if self.conn.their_state is h11.IDLE:
            return True
        return self.conn.their_state is h11.SEND_BODY and self.conn.our_state is h11.DONE

    def _follow_the_wait(self) -> None:
        """Start the deadline when a wait on the client began, stop it when the wait is over; else leave it be."""
        waiting = self._waiting_on_client()
        if waiting and self._head_deadline is None:
            self._head_deadline = self.loop.call_later(REQUEST_HEAD_TIMEOUT_S, self._deadline_expired)
        elif not waiting:
            self._stop_deadline()

    def _stop_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _deadline_expired(self) -> None:
        self._head_deadline = None
        if not self._waiting_on_client():
            return
        log.debug("closed the connection from %s: no whole request within %g s", self.client, REQUEST_HEAD_TIMEOUT_S)
        self.transport.close()


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn.Config keyword arguments that bound the time and size of what a client may leave unfinished."""
    return {
        "http": HeadDeadlineProtocol,
        "timeout_keep_alive": KEEP_ALIVE_TIMEOUT_S,
        "h11_max_incomplete_event_size": MAX_REQUEST_HEAD_BYTES,
        "ws_ping_interval": WS_PING_INTERVAL_S,
        "ws_ping_timeout": WS_PING_TIMEOUT_S,
    }
