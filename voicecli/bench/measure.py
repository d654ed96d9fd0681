"""Send a set of speech requests over one transport and time what comes back, checking the protocol as it goes.

Why strict checks in a benchmark: a transport that lost or duplicated a sentence could look fast. Every event is
checked against the order the requests were sent in (the transport contract: events strictly in request order),
so a timing is only recorded for a run whose audio all arrived, once, in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from voicecli.playout import Playout
from voicecli.tts.base import AudioChunk, AudioDone, AudioFailed, AudioStart, SpeechRequest, TTSTransport


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


async def speak(transport: TTSTransport, requests: list[SpeechRequest], stall_s: float = 300.0,
                started: float | None = None) -> Trace:
    """Send every request back to back (pipelined), then collect events until each one's AudioDone.

    Timing starts just before the first send (or at `started`, for sessions that begin together).
    Raises MeasureError when a request fails or nothing arrives for `stall_s` seconds.
    """
    traces = [RequestTrace(r.request_id) for r in requests]
    by_id = {t.request_id: t for t in traces}
    if len(by_id) != len(traces):
        raise MeasureError("request ids must be unique within a set")
    trace = Trace(time.monotonic() if started is None else started, traces)
    for request, request_trace in zip(requests, traces, strict=True):
        request_trace.sent = time.monotonic()
        await transport.send(request)
    current: RequestTrace | None = None
    remaining = len(traces)
    while remaining:
        try:
            event = await transport.next_event(timeout=stall_s)
        except TimeoutError:
            raise MeasureError(f"no audio event for {stall_s:.0f} s with {remaining} request(s) outstanding on "
                               f"the {transport.name} transport") from None
        rid = event.request_id
        entry = by_id.get(rid) if rid is not None else None
        if entry is None:
            if isinstance(event, AudioFailed):
                raise MeasureError(f"the endpoint failed: {event.message} ({event.code})")
            trace.stray_events += 1
            continue
        if isinstance(event, AudioStart):
            entry.starts += 1
            trace.start_order.append(entry.request_id)
            current = entry
        elif isinstance(event, AudioChunk):
            if current is not entry or entry.done is not None:
                trace.stray_events += 1
                continue
            if entry.first_byte is None:
                entry.first_byte = event.at
            entry.bytes += len(event.data)
            entry.arrivals.append((event.at, len(event.data)))
            entry.chunks += 1
        elif isinstance(event, AudioDone):
            entry.dones += 1
            trace.done_order.append(entry.request_id)
            if entry.done is None:
                entry.done = event.at
                remaining -= 1
            if event.timings is not None:
                entry.audio_s = event.timings.audio_s
                entry.server_synthesis_ms = event.timings.synthesis_ms
                entry.server_queue_ms = event.timings.queue_wait_ms
                entry.server_first_audio_ms = event.timings.first_audio_ms
            current = None
        else:
            raise MeasureError(f"request {rid} failed: {event.message} ({event.code})")
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
