"""Send a set of speech requests over one transport and time what comes back, checking the protocol as it goes.

Why strict checks in a benchmark: a transport that lost or duplicated a sentence could look fast. Every event is
checked against the order the requests were sent in (the transport contract: events strictly in request order),
so a timing is only recorded for a run whose audio all arrived, once, in order. The events are read by the same
`AudioConsumer` the pipeline and `voicecli say` use, which counts what the checks need.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from voicecli.tts.base import AudioFailed, SpeechRequest, TTSTransport
from voicecli.tts.consumer import AudioConsumer, RequestAudio, Stalled
from voicecli.wire.playout import Playout

PLAYED_MARGIN_S = 0.05
"""Beyond an answer's real-time end: the endpoint's clock for it starts a little before the client's."""


async def wait_played(listener: Playout) -> None:
    """Wait until `listener` (an answer's audio as it arrived, on the monotonic clock) has played it at real time.

    Why: the endpoint takes a request that comes while its listener is still playing the last answer as part of
    that answer, and one that comes after as a new turn, served first and its first piece in parts
    (voicecli_endpoint.session). A bench that asks its next question as soon as the bytes are in, faster than
    anyone listens, would measure continuations, not turns.
    """
    if listener.end is not None:
        await asyncio.sleep(max(0.0, listener.end - time.monotonic()) + PLAYED_MARGIN_S)


class MeasureError(RuntimeError):
    """A request failed, stalled, or its events broke the transport's ordering contract."""


@dataclass
class Trace:
    """Everything observed for one set of requests, in the order it was observed."""

    started: float
    requests: list[RequestAudio]
    """The consumer's record of each request, in the order they were sent."""
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
    if len({r.request_id for r in requests}) != len(requests):
        raise MeasureError("request ids must be unique within a set")
    reader = _Failing(transport, stall_s)
    trace = Trace(time.monotonic() if started is None else started, [])
    for request in requests:
        trace.requests.append(reader.track(request.request_id, time.monotonic()))
        await transport.send(request)
    reader.close()
    try:
        await reader.run()
    except Stalled:
        raise MeasureError(f"no audio event for {stall_s:.0f} s with {len(reader.pending)} request(s) outstanding "
                           f"on the {transport.name} transport") from None
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
