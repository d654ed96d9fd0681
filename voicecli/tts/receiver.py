"""The client side of the session protocol, whatever carries its frames (a WebSocket, or SageMaker's HTTP/2 stream).

It remembers which requests are outstanding and how much of each one's audio was already handed on, turns server
frames into AudioEvents, and prepares re-sends after a reconnect. The endpoint answers strictly in order and never
interleaves audio, so audio frames belong to the request whose synthesis_start came last. Synthesis is
deterministic for the same text, voice and speed, so a re-sent request's audio repeats byte for byte: the bytes
already delivered are skipped, and no sentence is lost or heard twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voicecli.tts.base import AudioChunk, AudioDone, AudioEvent, AudioFailed, AudioStart, SpeechRequest
from voicecli.wire.protocol import (
    CancelAck,
    Error,
    Mp3Audio,
    PcmAudio,
    ProtocolError,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    classify_frame,
    encode_message,
)


@dataclass
class _Outstanding:
    """A request sent but not finished, with how much of its audio was already handed on."""

    request: SpeechRequest
    started: bool = False
    delivered: int = 0
    skip: int = 0


def wire(request: SpeechRequest) -> str:
    """The protocol message for one speech request."""
    return encode_message(SynthesisRequest(text=request.text, voice=request.voice, speed=request.speed,
                                           request_id=request.request_id, format=request.format))


class Receiver:
    """Tracks outstanding requests and turns server frames into events for `emit`."""

    def __init__(self, emit: Callable[[AudioEvent], None]) -> None:
        self._emit = emit
        self._outstanding: dict[str, _Outstanding] = {}
        self._current: _Outstanding | None = None

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
            self._outstanding.pop(rid, None)

    def resend(self) -> list[str]:
        """Wire messages to re-send after a reconnect, in order; each request will skip the audio already heard."""
        messages = []
        for entry in self._outstanding.values():
            entry.skip, entry.delivered = entry.delivered, 0
            messages.append(wire(entry.request))
        return messages

    def fail_all(self, code: str, message: str) -> None:
        """The carrier is gone for good: every outstanding request fails with this reason."""
        for rid in list(self._outstanding):
            self._emit(AudioFailed(rid, code, message))
        self._outstanding.clear()

    def handle(self, frame: str | bytes) -> None:
        try:
            kind = classify_frame(frame)
        except ProtocolError as exc:
            self._emit(AudioFailed(None, str(exc.code), f"unreadable frame from the endpoint: {exc.message}"))
            return
        if isinstance(kind, Mp3Audio | PcmAudio):
            self._audio(kind.data if isinstance(kind, Mp3Audio) else kind.samples)
            return
        message = kind.message
        if isinstance(message, SynthesisStart):
            entry = self._outstanding.get(str(message.request_id))
            self._current = entry
            if entry is not None and not entry.started:
                entry.started = True
                self._emit(AudioStart(entry.request.request_id, message.format, message.sample_rate))
        elif isinstance(message, SynthesisComplete):
            entry = self._outstanding.pop(str(message.request_id), None)
            if entry is not None:
                self._emit(AudioDone(entry.request.request_id, message.timings))
        elif isinstance(message, Error):
            rid = None if message.request_id is None else str(message.request_id)
            if rid is None or self._outstanding.pop(rid, None) is not None:
                self._emit(AudioFailed(rid, message.code, message.message))
        elif isinstance(message, CancelAck):
            for dropped in message.dropped:
                self._outstanding.pop(str(dropped), None)

    def _audio(self, data: bytes) -> None:
        entry = self._current
        if entry is None or entry.request.request_id not in self._outstanding:
            return  # audio of a cancelled request still in flight
        if entry.skip:
            skipped = min(entry.skip, len(data))
            entry.skip -= skipped
            entry.delivered += skipped
            data = data[skipped:]
            if not data:
                return
        entry.delivered += len(data)
        self._emit(AudioChunk(entry.request.request_id, data))
