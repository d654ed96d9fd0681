"""One WebSocket session of the protocol in `voicecli.wire.protocol` (docs/protocol.md has the rules).

Two tasks per connection: the reader parses every incoming frame and answers bad ones, cancels and the like
at once; the worker answers synthesis requests one after another, in the order received, so the audio of two
requests never interleaves. All sends go through one lock, and a dropped request's audio is checked for
under that lock, so after a `cancelled` frame no frame of a dropped request can follow.

Each session keeps its listener's `Playout` (the audio sent ahead of real time) and marks a request that arrives
while nothing is queued, being answered or still playing as the start of a turn: the scheduler serves the first
piece of a turn first (in parts where the engine can, each sent as it is decoded: see
voicecli_endpoint.engines.decoder_parts), then the session whose listener is closest to running dry.

A client that stops reading is dropped once one send has waited SEND_TIMEOUT_S for it, with a WARNING that says so.
The WebSocket layer's keepalive cannot be relied on for this: once the client's socket sits with a zero window, its
ping and its close frame wait behind the unsent audio for ever (measured: three never-reading clients held their
slots for 90 s and more once their buffers filled; they were dropped by the keepalive only while their buffers
still had room).

A third task closes the session when it has been idle (no message received, nothing queued or being answered)
for `Limits.idle_timeout_s`: an abandoned client must not hold one of the endpoint's few session slots forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from voicecli.wire.playout import Playout
from voicecli.wire.protocol import (
    SAMPLE_RATE,
    Cancel,
    CancelAck,
    ClientMessage,
    Close,
    Error,
    ErrorCode,
    Limits,
    ProtocolError,
    RequestId,
    ServerMessage,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    Timings,
    Words,
    WordTiming,
    encode_message,
)
from voicecli_endpoint.audio_encoding import stream_encoder
from voicecli_endpoint.scheduler import CancelToken, JobDropped
from voicecli_endpoint.synthesis import Synthesizer
from voicecli_endpoint.validation import parse_client_message, shown_error

log = logging.getLogger(__name__)

_session_ids = itertools.count(1)


@dataclass
class _Pending:
    request: SynthesisRequest
    request_id: RequestId
    received: float
    first: bool = False
    """It started a turn: nothing was queued, being answered or still playing when it arrived."""
    token: CancelToken = field(default_factory=CancelToken)


STALLED_SEND_S = 5.0
"""A send that waited this long before the connection broke means the client had stopped reading."""
SEND_TIMEOUT_S = 30.0
"""A client that accepts no byte for this long is dropped (see the module docstring)."""


class _Gone(Exception):
    """The client went away while we were sending (or stopped reading until the connection was dropped)."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"the send waited {waited_s:.1f} s")
        self.waited_s = waited_s


class WebSocketSession:
    """Serves one accepted WebSocket until the client closes it, sends close, or disconnects."""

    def __init__(
        self,
        websocket: WebSocket,
        synthesizer: Synthesizer,
        *,
        limits: Limits,
        mp3_kbps: int,
    ) -> None:
        self.id = next(_session_ids)
        self._ws = websocket
        self._synth = synthesizer
        self._limits = limits
        self._mp3_kbps = mp3_kbps
        self._max_pending = limits.max_queued_requests
        self._last_activity = time.monotonic()
        self._pending: deque[_Pending] = deque()
        self._has_pending = asyncio.Event()
        self._current: _Pending | None = None
        self._closing = False
        self._send_lock = asyncio.Lock()
        self._auto_ids = itertools.count(1)
        self.playout = Playout()
        """The listener's position, on the scheduler's clock (time.monotonic)."""
        self.requests_done = 0
        self._gone_logged = False
        self._reader: asyncio.Task[None] | None = None
        self._stalled = False
        self._sending_since: float | None = None
        """When the send in progress began (None: no send in progress): how long a client has not been reading."""

    @property
    def key(self) -> str:
        """This session's key in the fair scheduler."""
        return f"ws-{self.id}"

    async def run(self) -> None:
        worker = asyncio.create_task(self._work(), name=f"{self.key}-worker")
        helpers = [worker]
        if self._limits.idle_timeout_s > 0:
            helpers.append(asyncio.create_task(self._watch_idle(self._limits.idle_timeout_s),
                                               name=f"{self.key}-idle"))
        self._reader = asyncio.current_task()
        try:
            await self._read()
        except _Gone as gone:
            self._log_gone(gone.waited_s)
        except asyncio.CancelledError:
            if not self._stalled:
                raise
            if self._reader is not None:
                self._reader.uncancel()  # our own cancellation (see _drop_stalled), not the server's
        finally:
            if self._sending_since is not None:  # the disconnect reached the reader first; the worker was stuck
                self._log_gone(time.monotonic() - self._sending_since)
            for task in helpers:
                task.cancel()
            for task in helpers:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            for pending in self._pending:
                pending.token.cancel()
            if self._current is not None:
                self._current.token.cancel()
            dropped = self._synth.scheduler.drop_session(self.key)
            log.info("session %s ended after %d request(s); %d queued job(s) freed", self.key,
                     self.requests_done, dropped)

    # ---------------------------------------------------------------------------------------------------- reader

    async def _read(self) -> None:
        while True:
            message = await self._ws.receive()
            if message["type"] == "websocket.disconnect":
                self._log_disconnect(message.get("code"))
                return
            self._last_activity = time.monotonic()
            data: str | bytes | None = message.get("bytes")
            if data is None:
                data = message.get("text")
            if data is None:
                continue
            try:
                parsed = parse_client_message(data, voices=self._synth.voices, limits=self._limits)
            except ProtocolError as exc:
                log.info("session %s: rejected message: %s", self.key, exc)
                await self._send(Error.from_protocol_error(exc))
                continue
            except Exception:  # a bug in validation must cost one error frame, never the session and its queue
                log.exception("session %s: validating a message failed", self.key)
                await self._send(Error(ErrorCode.INTERNAL_ERROR, "the server failed to read this message (a bug, "
                                       "logged on the server); the session goes on"))
                continue
            await self._dispatch(parsed)

    async def _dispatch(self, message: ClientMessage) -> None:
        if isinstance(message, SynthesisRequest):
            await self._enqueue(message)
        elif isinstance(message, Cancel):
            await self._cancel(message.request_id)
        elif isinstance(message, Close):
            self._closing = True
            self._has_pending.set()

    async def _enqueue(self, request: SynthesisRequest) -> None:
        if self._closing:
            await self._send(Error(ErrorCode.SESSION_CLOSING, "the session is closing", request.request_id))
            return
        if len(self._pending) >= self._max_pending:
            message = (f"{self._max_pending} requests are already waiting, the limit per session; "
                       "send more once some have finished")
            await self._send(Error(ErrorCode.QUEUE_FULL, message, request.request_id))
            return
        request_id = request.request_id if request.request_id is not None else f"{self.key}-{next(self._auto_ids)}"
        idle = self._current is None and not self._pending and self.playout.ahead_s(time.monotonic()) == 0.0
        self._pending.append(_Pending(request, request_id, time.perf_counter(), first=idle))
        self._has_pending.set()

    async def _cancel(self, request_id: RequestId | None) -> None:
        dropped: list[RequestId] = []
        targets = ([self._current] if self._current is not None else []) + list(self._pending)
        for pending in targets:
            if not pending.token.cancelled and (request_id is None or pending.request_id == request_id):
                pending.token.cancel()
                dropped.append(pending.request_id)
        self._pending = deque(p for p in self._pending if not p.token.cancelled)
        self._synth.scheduler.drop_cancelled(self.key)
        if request_id is None:  # the listener stopped too: what was sent is not playing any more
            self.playout.stop()
        await self._send(CancelAck(request_id, tuple(dropped)))

    # ---------------------------------------------------------------------------------------------------- worker

    async def _work(self) -> None:
        try:
            while True:
                if not self._pending:
                    if self._closing:
                        await self._close()
                        return
                    self._has_pending.clear()
                    await self._has_pending.wait()
                    continue
                pending = self._pending.popleft()
                if pending.token.cancelled:
                    continue
                self._current = pending
                try:
                    await self._serve(pending)
                finally:
                    self._current = None
                    self._last_activity = time.monotonic()
                self.requests_done += 1
        except _Gone as gone:
            self._log_gone(gone.waited_s)
            if gone.waited_s >= SEND_TIMEOUT_S:
                self._drop_stalled()
            return

    def _drop_stalled(self) -> None:
        """End the session from the worker: the reader would otherwise wait for messages for ever."""
        self._stalled = True
        if self._reader is not None:
            self._reader.cancel()

    def _log_disconnect(self, code: int | None) -> None:
        """Say why a session with work left ended: without a close frame (1005, 1006) the client either vanished
        or stopped reading, and then the WebSocket layer dropped it for not answering its keepalive pings."""
        waiting = len(self._pending) + (self._current is not None)
        if waiting and code in (1005, 1006):
            self._gone_logged = True
            log.warning("session %s: connection lost without a close frame (code %s) with %d request(s) unanswered: "
                        "the client went away, or stopped reading and was dropped for not answering keepalive "
                        "pings", self.key, code, waiting)

    def _log_gone(self, waited_s: float) -> None:
        """Say why a session ended while we were sending: a client that stopped reading is dropped by the
        WebSocket layer (keepalive ping timeout), and that deserves a line of its own, not silence."""
        if self._gone_logged:  # the reader and the worker may both see the same broken connection
            return
        self._gone_logged = True
        waiting = len(self._pending) + (self._current is not None)
        if waited_s >= STALLED_SEND_S:
            log.warning("session %s: dropped a client that stopped reading: a send waited %.0f s for it, then the "
                        "connection was lost; %d request(s) unanswered", self.key, waited_s, waiting)
        else:
            log.info("session %s: the client went away while being answered; %d request(s) unanswered", self.key,
                     waiting)

    async def _watch_idle(self, timeout_s: float) -> None:
        """Close the session once it has had no message and no work for `timeout_s` (see the module docstring)."""
        while True:
            busy = bool(self._pending) or self._current is not None
            idle_for = time.monotonic() - self._last_activity
            if not busy and idle_for >= timeout_s:
                break
            await asyncio.sleep(min(timeout_s, 1.0) if busy else timeout_s - idle_for)
        log.info("session %s: closing after %.0f s without a message", self.key, timeout_s)
        await self._close(f"{ErrorCode.IDLE_TIMEOUT}: no message for {timeout_s:g} s")

    async def _close(self, reason: str = "") -> None:
        async with self._send_lock:
            if self._ws.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(Exception):
                    await self._ws.close(code=1000, reason=reason)

    async def _serve(self, pending: _Pending) -> None:
        request = pending.request
        picked = time.perf_counter()
        session_wait = picked - pending.received
        engine_wait = synthesis = encoding = 0.0
        samples = pieces = 0
        first_audio: float | None = None
        encoder = stream_encoder(request.format, mp3_kbps=self._mp3_kbps)
        if not await self._send(SynthesisStart(pending.request_id, request.format, SAMPLE_RATE), pending):
            return
        try:
            pieces_of = self._synth.stream(self.key, request.text, request.voice, request.speed, pending.token,
                                           first=pending.first, playout=self.playout, timed=request.word_timings)
            piece_index, piece_start = -1, 0
            async with contextlib.aclosing(pieces_of) as stream:
                async for piece in stream:
                    if piece.index != piece_index:  # word times count from the piece's first sample sent
                        piece_index, piece_start = piece.index, samples
                    engine_wait += piece.queue_wait_s
                    synthesis += piece.synthesis_s
                    pieces += 1
                    started = time.perf_counter()
                    messages = await asyncio.to_thread(encoder.encode, piece.audio)
                    encoding += time.perf_counter() - started
                    samples += len(piece.audio)
                    for data in messages:
                        if not await self._send_audio(data, pending):
                            return
                        if first_audio is None:
                            first_audio = time.perf_counter() - pending.received
                    self.playout.add(time.monotonic(), len(piece.audio) / SAMPLE_RATE)
                    if piece.words and not await self._send(Words(pending.request_id, tuple(
                            WordTiming(word.text, (piece_start + word.start) * 1000 / SAMPLE_RATE,
                                       (piece_start + word.end) * 1000 / SAMPLE_RATE) for word in piece.words)),
                            pending):
                        return
            started = time.perf_counter()
            tail = encoder.flush()
            encoding += time.perf_counter() - started
            for data in tail:
                if not await self._send_audio(data, pending):
                    return
                if first_audio is None:
                    first_audio = time.perf_counter() - pending.received
        except JobDropped:
            return
        except _Gone:
            raise
        except Exception as exc:
            log.exception("session %s: synthesis of %r failed", self.key, pending.request_id)
            failed = Error(ErrorCode.SYNTHESIS_FAILED, f"synthesis failed: {shown_error(exc)}", pending.request_id)
            await self._send(failed, pending)
            return
        timings = Timings(
            queue_wait_ms=(session_wait + engine_wait) * 1000,
            synthesis_ms=synthesis * 1000,
            encoding_ms=encoding * 1000,
            audio_s=samples / SAMPLE_RATE,
            first_audio_ms=None if first_audio is None else first_audio * 1000,
            chunks=pieces,
        )
        await self._send(SynthesisComplete(pending.request_id, timings, time.perf_counter() - pending.received),
                         pending)

    # ---------------------------------------------------------------------------------------------------- sending

    async def _send(self, message: ServerMessage, about: _Pending | None = None) -> bool:
        """Send a control frame; False (and nothing sent) when `about` was cancelled meanwhile."""
        async with self._send_lock:
            if about is not None and about.token.cancelled:
                return False
            self._sending_since = started = time.monotonic()
            try:
                await asyncio.wait_for(self._ws.send_text(encode_message(message)), SEND_TIMEOUT_S)
            except (WebSocketDisconnect, RuntimeError, OSError, TimeoutError) as exc:
                raise _Gone(time.monotonic() - started) from exc
            finally:
                self._sending_since = None
        return True

    async def _send_audio(self, data: bytes, about: _Pending) -> bool:
        async with self._send_lock:
            if about.token.cancelled:
                return False
            self._sending_since = started = time.monotonic()
            try:
                await asyncio.wait_for(self._ws.send_bytes(data), SEND_TIMEOUT_S)
            except (WebSocketDisconnect, RuntimeError, OSError, TimeoutError) as exc:
                raise _Gone(time.monotonic() - started) from exc
            finally:
                self._sending_since = None
        return True
