"""The client side of the session protocol, whatever carries its frames (a WebSocket, or SageMaker's HTTP/2 stream).

It remembers which requests are outstanding and how much of each one's audio was already handed on, turns server
frames into AudioEvents, and re-sends what is unfinished on a new carrier. The endpoint answers strictly in order and
never interleaves audio, so audio frames belong to the request whose synthesis_start came last. Synthesis is
deterministic for the same text, voice and speed, so a re-sent request's audio repeats byte for byte: the bytes
already delivered are skipped, and no sentence is lost or heard twice.

It is also where the endpoint is held to the protocol, since it is the one reader of frames: a frame out of order
(audio before its synthesis_start, a terminal frame for a request that was never sent or never started), a message
over MAX_MESSAGE_BYTES or more audio than MAX_REQUEST_AUDIO_S fails the request being answered with an error that
says so, where it used to pass as a request with no audio. The carrier cancels that request at the endpoint, and the
session goes on with the next one.

`Reconnects` is the one reconnect-with-resend of the persistent transports, with its budget: at most `limit`
reconnects within `window_s` seconds, whether they opened or not, so an endpoint that accepts each connection and
drops it at once cannot make the client reconnect forever (it used to: 581 times in 60 s).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from voicecli.tts.base import (
    AUDIO_TOO_LONG,
    CONNECTION_LOST,
    MAX_MESSAGE_BYTES,
    MESSAGE_TOO_LARGE,
    PROTOCOL_ERROR,
    AudioBudget,
    AudioChunk,
    AudioDone,
    AudioEvent,
    AudioFailed,
    AudioStart,
    AudioWords,
    SpeechRequest,
    TransportError,
    too_large,
    too_much_audio,
)
from voicecli.wire.protocol import (
    CancelAck,
    Error,
    Mp3Audio,
    PcmAudio,
    ProtocolError,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    Words,
    classify_frame,
    encode_message,
)

Send = Callable[[str], Awaitable[None]]
"""Puts one protocol message on a carrier."""

MAX_IGNORED = 256
"""Most ids whose late frames are dropped quietly. An honest endpoint soon ends each (a session cancels a few requests
at a time); the bound is for one that names ids it never ends, so that it cannot grow the set without end."""


@dataclass
class _Outstanding:
    """A request sent but not finished, with how much of its audio was already handed on."""

    request: SpeechRequest
    started: bool = False
    delivered: int = 0
    skip: int = 0
    budget: AudioBudget = field(default_factory=AudioBudget)
    """Its audio on the current carrier (a re-sent request's audio starts over)."""
    words_delivered: int = 0
    words_skip: int = 0
    """Words handed on, and words to skip on a new carrier: a re-sent request's words repeat as its audio does."""


def wire(request: SpeechRequest) -> str:
    """The protocol message for one speech request."""
    return encode_message(SynthesisRequest(text=request.text, voice=request.voice, speed=request.speed,
                                           request_id=request.request_id, format=request.format,
                                           word_timings=request.word_timings))


def protocol_broken(what: str) -> str:
    """What happened and what to do, for a frame that breaks the protocol's order."""
    return (f"the endpoint broke the protocol: {what}, and the request was refused; check that the endpoint is a "
            "voicecli endpoint and up to date (`voicecli doctor`)")


class Receiver:
    """Tracks outstanding requests and turns server frames into events for `emit`."""

    def __init__(self, emit: Callable[[AudioEvent], None]) -> None:
        self._emit = emit
        self._outstanding: dict[str, _Outstanding] = {}
        self._current: str | None = None
        """The request whose synthesis_start came last on this carrier, until its terminal frame."""
        self._ignored: set[str] = set()
        """Requests no longer followed (cancelled, or refused by the client) whose late frames are dropped quietly;
        each leaves at its terminal frame or the cancel's acknowledgement, and all at a new carrier."""

    @property
    def outstanding(self) -> list[str]:
        """Ids of requests sent whose audio has not finished arriving, in send order."""
        return list(self._outstanding)

    def sent(self, request: SpeechRequest) -> str:
        """Track a request about to be sent; returns its wire message."""
        self._outstanding[request.request_id] = _Outstanding(request)
        return wire(request)

    def forget(self, request_id: str | None) -> None:
        """Stop tracking one request (None: all), e.g. on cancel: later frames about it are ignored."""
        for rid in list(self._outstanding) if request_id is None else [request_id]:
            if self._outstanding.pop(rid, None) is not None:
                self._ignore(rid)

    async def resend(self, send: Send) -> None:
        """A new carrier: re-send every unfinished request on it, in order; each will skip the audio already heard.
        Nothing of the old carrier's answers can arrive on the new one, so its bookkeeping starts afresh."""
        self._current = None
        self._ignored.clear()
        for entry in self._outstanding.values():
            entry.skip, entry.delivered, entry.budget = entry.delivered, 0, AudioBudget()
            entry.words_skip, entry.words_delivered = entry.words_delivered, 0
            await send(wire(entry.request))

    def fail_all(self, code: str, message: str) -> None:
        """The carrier is gone for good: every outstanding request fails with this reason."""
        for rid in list(self._outstanding):
            self._emit(AudioFailed(rid, code, message))
        self._outstanding.clear()

    def fail_answering(self, code: str, message: str) -> str | None:
        """Refuse the request the endpoint is answering now (the carrier saw something wrong with it); returns its
        id, for the carrier to cancel at the endpoint, or None when none is outstanding. The endpoint answers in
        order, so that is the current one, else the first one sent."""
        rid = self._current if self._current in self._outstanding else next(iter(self._outstanding), None)
        if rid is None:
            self._emit(AudioFailed(None, code, message))
            return None
        self._refuse(rid, code, message)
        return rid

    def handle(self, frame: str | bytes) -> list[str]:
        """Read one frame from the endpoint. Returns the ids of requests the client refused on reading it (see the
        module): the carrier cancels them at the endpoint."""
        if len(frame) > MAX_MESSAGE_BYTES:  # a carrier without a limit of its own (a WebSocket refuses them first)
            return self._refused(self.fail_answering(MESSAGE_TOO_LARGE, too_large(len(frame))))
        try:
            kind = classify_frame(frame)
        except ProtocolError as exc:
            self._emit(AudioFailed(None, str(exc.code), f"unreadable frame from the endpoint: {exc.message}"))
            return []
        if isinstance(kind, Mp3Audio):
            return self._audio("mp3", kind.data)
        if isinstance(kind, PcmAudio):
            return self._audio("pcm16", kind.samples)
        message = kind.message
        if isinstance(message, SynthesisStart):
            return self._start(str(message.request_id), message)
        if isinstance(message, SynthesisComplete):
            return self._complete(str(message.request_id), message)
        if isinstance(message, Error):
            rid = None if message.request_id is None else str(message.request_id)
            if rid is None:
                self._emit(AudioFailed(None, message.code, message.message))
                return []
            if rid == self._current:
                self._current = None
            self._ignored.discard(rid)
            if self._outstanding.pop(rid, None) is not None:
                self._emit(AudioFailed(rid, message.code, message.message))
        elif isinstance(message, Words):
            rid = str(message.request_id)
            entry = self._outstanding.get(rid)
            if entry is not None and rid == self._current:
                self._words(entry, message)
        elif isinstance(message, CancelAck):
            for dropped in message.dropped:
                self._outstanding.pop(str(dropped), None)
                self._ignored.discard(str(dropped))
        return []

    def _start(self, rid: str, message: SynthesisStart) -> list[str]:
        entry = self._outstanding.get(rid)
        if entry is None and rid not in self._ignored:
            refused = self.fail_answering(PROTOCOL_ERROR, protocol_broken(
                f"synthesis_start for request {rid!r}, which this client did not send or already finished"))
            self._ignore(rid)  # its own audio and completion follow: dropped, not taken for another request's
            self._current = rid
            return self._refused(refused)
        self._current = rid
        if entry is not None and not entry.started:
            entry.started = True
            self._emit(AudioStart(entry.request.request_id, message.format, message.sample_rate))
        return []

    def _complete(self, rid: str, message: SynthesisComplete) -> list[str]:
        if rid in self._ignored:
            self._ignored.discard(rid)
            if self._current == rid:
                self._current = None
            return []
        if rid not in self._outstanding:
            return self._refused(self.fail_answering(PROTOCOL_ERROR, protocol_broken(
                f"synthesis_complete for request {rid!r}, which this client did not send or already finished")))
        if self._current != rid:
            self._refuse(rid, PROTOCOL_ERROR, protocol_broken(f"synthesis_complete for request {rid!r} before its "
                                                              "synthesis_start"))
            return []  # it is finished at the endpoint: nothing to cancel
        self._current = None
        entry = self._outstanding.pop(rid)
        self._emit(AudioDone(entry.request.request_id, message.timings))
        return []

    def _audio(self, audio_format: str, data: bytes) -> list[str]:
        if self._current is None:
            return self._refused(self.fail_answering(PROTOCOL_ERROR, protocol_broken(
                "audio before any synthesis_start (or after the request's synthesis_complete)")))
        entry = self._outstanding.get(self._current)
        if entry is None:
            return []  # audio of a cancelled or refused request still in flight
        rid = entry.request.request_id
        try:
            within = entry.budget.spend(audio_format, data)
        except ValueError as exc:
            self._refuse(rid, PROTOCOL_ERROR, protocol_broken(f"MP3 audio that is not whole frames ({exc})"))
            return [rid]
        if not within:
            self._refuse(rid, AUDIO_TOO_LONG, too_much_audio())
            return [rid]
        if entry.skip:
            skipped = min(entry.skip, len(data))
            entry.skip -= skipped
            entry.delivered += skipped
            data = data[skipped:]
            if not data:
                return []
        entry.delivered += len(data)
        self._emit(AudioChunk(rid, data))
        return []

    def _words(self, entry: _Outstanding, message: Words) -> None:
        """Hand on the words of the request being answered, less those already handed on before a re-send."""
        skipped = min(entry.words_skip, len(message.words))
        entry.words_skip -= skipped
        entry.words_delivered += len(message.words)
        if len(message.words) > skipped:
            self._emit(AudioWords(entry.request.request_id, message.words[skipped:]))

    def _refuse(self, rid: str, code: str, message: str) -> None:
        """The client fails this request: one AudioFailed now, its later frames dropped."""
        self._outstanding.pop(rid, None)
        self._ignore(rid)
        self._emit(AudioFailed(rid, code, message))

    def _ignore(self, rid: str) -> None:
        if len(self._ignored) >= MAX_IGNORED:
            self._ignored.pop()  # an endpoint naming ids it never ends: one of them may be taken for a violation
        self._ignored.add(rid)

    @staticmethod
    def _refused(rid: str | None) -> list[str]:
        return [] if rid is None else [rid]


@dataclass(frozen=True)
class _Try:
    at: float
    error: str | None
    """Why the carrier did not open; None when it opened (and, if another try follows, was dropped again)."""


class Reconnects:
    """Re-opens a persistent transport's carrier when it ends with requests outstanding, and re-sends them.

    The budget is a number of reconnects within a time window, never reset by a carrier that opened: an endpoint
    that accepts each connection and drops it at once spends it as surely as one that is down. The wait before each
    try doubles with the tries already in the window. When the budget is spent, every outstanding request fails
    with a message that names what happened: connections accepted then dropped, or an endpoint that cannot be
    reached.
    """

    def __init__(self, receiver: Receiver, where: str, limit: int, window_s: float, base_delay_s: float) -> None:
        """`where` names the endpoint in messages ("the TTS endpoint ws://..."); `limit` reconnects at most within any
        `window_s` seconds."""
        self._receiver = receiver
        self._where = where
        self.limit = limit
        self.window_s = window_s
        self.base_delay_s = base_delay_s
        self._tries: deque[_Try] = deque()

    async def run(self, reopen: Callable[[], Awaitable[Send | None]], lock: asyncio.Lock, ended: str) -> str | None:
        """The carrier ended (`ended` says how) with requests outstanding: re-open it with `reopen` (under `lock`, the
        carrier's send lock) and re-send them. `reopen` returns the new carrier's send, or None when a carrier is open
        already (a send opened one, and re-sent). Returns None once they are on their way; else why not, when every
        outstanding request has failed with that reason."""
        while True:
            now = time.monotonic()
            while self._tries and now - self._tries[0].at > self.window_s:
                self._tries.popleft()
            if len(self._tries) >= self.limit:
                message = self._gave_up(ended)
                self._receiver.fail_all(CONNECTION_LOST, message)
                return message
            await asyncio.sleep(self.base_delay_s * 2 ** len(self._tries))
            async with lock:
                try:
                    send = await reopen()
                except TransportError as exc:
                    cause = exc.__cause__ or exc
                    self._tries.append(_Try(time.monotonic(), f"{cause.__class__.__name__}: {cause}"))
                    continue
                self._tries.append(_Try(time.monotonic(), None))
                if send is not None:
                    await self._receiver.resend(send)
            return None

    def _gave_up(self, ended: str) -> str:
        if not self._tries:
            return f"lost the connection to {self._where} ({ended}); reconnecting is off"
        span = time.monotonic() - self._tries[0].at
        last = self._tries[-1].error
        if last is None:
            opened = sum(1 for attempt in self._tries if attempt.error is None)
            return (f"{self._where} accepted the connection and dropped it again, {opened} times in {span:.0f} s "
                    f"(last: {ended}); it is failing or restarting: check its log, or `voicecli doctor`")
        return (f"lost the connection to {self._where} ({ended}) and could not reconnect: {len(self._tries)} tries in "
                f"{span:.0f} s, the last one {last}; check that the endpoint is running (`voicecli doctor`)")
