"""Send a set of speech requests over one transport and time what comes back, checking the protocol as it goes.

Why strict checks in a benchmark: a transport that lost or duplicated a sentence could look fast. Every event is
checked against the order the requests were sent in (the transport contract: events strictly in request order),
so a timing is only recorded for a run whose audio all arrived, once, in order. The events are read by the same
`AudioConsumer` the pipeline and `voicecli say` use, which counts what the checks need.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from voicecli.playout import Playout
from voicecli.tts.base import AudioFailed, SpeechRequest, TTSTransport
from voicecli.tts.consumer import AudioConsumer, RequestAudio, Stalled


class MeasureError(RuntimeError):
    """A request failed, stalled, or its events broke the transport's ordering contract."""


@dataclass
class RequestTrace:
    request_id: str
    sent: float = 0.0
    starts: int = 0
    dones: int = 0
    first_byte: float | None = None
    done: float | None = None
    bytes: int = 0
    chunks: int = 0
    audio_s: float = 0.0
    server_synthesis_ms: float | None = None
    server_queue_ms: float | None = None
    server_first_audio_ms: float | None = None
    """The endpoint's own time from receiving the request to sending its first audio (WebSocket only)."""
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    """(time, bytes) of every audio chunk, for what a real-time listener would hear (`Trace.playout`)."""


@dataclass
class Trace:
    """Everything observed for one set of requests, in the order it was observed."""

    started: float
    requests: list[RequestTrace]
    start_order: list[str] = field(default_factory=list)
    done_order: list[str] = field(default_factory=list)
    stray_events: int = 0
    """Events for a request id that is not in this set, or audio outside a started request."""

    @property
    def ttfa_ms(self) -> float | None:
        first = self.requests[0].first_byte
        return None if first is None else (first - self.started) * 1000

    @property
    def total_ms(self) -> float | None:
        last = self.requests[-1].done
        return None if last is None else (last - self.started) * 1000

    @property
    def audio_s(self) -> float:
        return sum(r.audio_s for r in self.requests)

    def playout(self) -> Playout:
        """A real-time listener of these requests, one after another, from the first audio on.

        A chunk's duration is its share of its request's bytes times the request's audio seconds: exact for PCM
        and for the endpoint's constant-bitrate MP3 (frame-aligned chunks).
        """
        listener = Playout()
        for request in self.requests:
            for at, size in request.arrivals:
                listener.add(at, request.audio_s * size / request.bytes if request.bytes else 0.0)
        return listener


class _Failing(AudioConsumer):
    """A benchmark records nothing for a set with a failed request: any failure ends it."""

    def failed(self, entry: RequestAudio | None, event: AudioFailed) -> None:
        if entry is None:
            raise MeasureError(f"the endpoint failed: {event.message} ({event.code})")
        raise MeasureError(f"request {entry.request_id} failed: {event.message} ({event.code})")


async def speak(transport: TTSTransport, requests: list[SpeechRequest], stall_s: float = 300.0,
                started: float | None = None) -> Trace:
    """Send every request back to back (pipelined), then collect events until each one's AudioDone.

    Timing starts just before the first send (or at `started`, for sessions that begin together).
    Raises MeasureError when a request fails or nothing arrives for `stall_s` seconds.
    """
    traces = [RequestTrace(r.request_id) for r in requests]
    if len({t.request_id for t in traces}) != len(traces):
        raise MeasureError("request ids must be unique within a set")
    trace = Trace(time.monotonic() if started is None else started, traces)
    reader = _Failing(transport, stall_s)
    for request, request_trace in zip(requests, traces, strict=True):
        request_trace.sent = time.monotonic()
        reader.track(request.request_id, request_trace.sent)
        await transport.send(request)
    reader.close()
    try:
        await reader.run()
    except Stalled:
        raise MeasureError(f"no audio event for {stall_s:.0f} s with {len(reader.pending)} request(s) outstanding "
                           f"on the {transport.name} transport") from None
    for request_trace in traces:
        entry = reader.requests[request_trace.request_id]
        request_trace.starts, request_trace.dones = entry.starts, entry.dones
        request_trace.first_byte, request_trace.done = entry.first_byte, entry.done
        request_trace.bytes, request_trace.chunks, request_trace.arrivals = entry.bytes, entry.chunks, entry.arrivals
        if entry.timings is not None:
            request_trace.audio_s = entry.timings.audio_s
            request_trace.server_synthesis_ms = entry.timings.synthesis_ms
            request_trace.server_queue_ms = entry.timings.queue_wait_ms
            request_trace.server_first_audio_ms = entry.timings.first_audio_ms
    trace.start_order, trace.done_order, trace.stray_events = reader.start_order, reader.done_order, reader.strays
    return trace


def check_exact(trace: Trace) -> list[str]:
    """Problems with a finished trace: lost, duplicated, out-of-order or empty requests (empty list: exact)."""
    expected = [r.request_id for r in trace.requests]
    problems: list[str] = []
    if trace.start_order != expected:
        problems.append(f"audio started in order {trace.start_order}, sent as {expected}")
    if trace.done_order != expected:
        problems.append(f"audio completed in order {trace.done_order}, sent as {expected}")
    for request in trace.requests:
        if request.starts != 1 or request.dones != 1:
            problems.append(f"{request.request_id}: {request.starts} start(s), {request.dones} completion(s)")
        if request.bytes == 0:
            problems.append(f"{request.request_id}: no audio bytes")
    if trace.stray_events:
        problems.append(f"{trace.stray_events} event(s) outside any request of the set")
    return problems
