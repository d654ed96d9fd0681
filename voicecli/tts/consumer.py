"""The one reader of a transport's events, shared by the pipeline, `voicecli say` and the benches.

A transport yields AudioStart, AudioChunk, AudioDone and AudioFailed for every request, strictly in request order
(`voicecli.tts.base`). Whoever sends requests then has the same bookkeeping to do: which requests are still
outstanding, when each one's first audio byte arrived, decoding its audio as it comes, when it finished or why it
failed, which events belong to nothing it asked for (a cancelled request's audio still in flight, or a transport
breaking its contract), and when the endpoint has gone quiet for too long. `AudioConsumer` does all of that once;
its users say only what each happening means to them, by overriding the hooks (`first_byte`, `audio`, `timed`,
`finished`, `failed`).

The set of requests may grow while it is being read (the pipeline sends sentence N+1 while N plays): `run` returns
once `close` said no more will come and none is outstanding. It waits on the transport's queue and on its own wake
event (set by `track`, `forget`, `close`) at once, so it never polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from voicecli.audio.pcm import Samples
from voicecli.audio.streams import StreamDecoder
from voicecli.tts.base import AudioChunk, AudioDone, AudioEvent, AudioFailed, AudioStart, AudioWords, TTSTransport
from voicecli.wire.protocol import Timings, WordTiming


class Stalled(TimeoutError):
    """No event arrived for `stall_s` seconds while requests were outstanding."""


@dataclass
class RequestAudio:
    """What one request's events said so far, all on the monotonic clock."""

    request_id: str
    sent: float | None = None
    starts: int = 0
    dones: int = 0
    first_byte: float | None = None
    done: float | None = None
    bytes: int = 0
    chunks: int = 0
    samples: int = 0
    """Decoded samples delivered (with a decoder)."""
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    """(time, bytes) of every audio chunk."""
    timings: Timings | None = None
    """The endpoint's own timings from its AudioDone (where the transport has them)."""
    failure: AudioFailed | None = None
    words: list[WordTiming] = field(default_factory=list)
    """The words' times so far, in ms from the start of the request's audio (only for a request that asked)."""

    @property
    def audio_s(self) -> float:
        """Seconds of audio, as the endpoint counted them (0 without its timings)."""
        return 0.0 if self.timings is None else self.timings.audio_s

    @property
    def server_synthesis_ms(self) -> float | None:
        return None if self.timings is None else self.timings.synthesis_ms

    @property
    def server_queue_ms(self) -> float | None:
        return None if self.timings is None else self.timings.queue_wait_ms

    @property
    def server_first_audio_ms(self) -> float | None:
        """The endpoint's own time from receiving the request to sending its first audio (WebSocket only)."""
        return None if self.timings is None else self.timings.first_audio_ms


class AudioConsumer:
    """Reads a transport's events for the requests `track`ed, until `close` and none outstanding (see module).

    `decoder` makes one request's decoder for an audio format (None: nothing is decoded, as in the benches, which
    count bytes). The format is the one the request's AudioStart announces, so what the endpoint says it sends is
    what is decoded (the format is decided once, by the endpoint's answer); `audio_format`, the format asked for, is
    used only for audio that arrives without a start event.
    Events about a request never tracked, or about one already finished or forgotten, change nothing but the
    bookkeeping: repeated starts and completions are counted (the benches check them), stray audio is counted in
    `strays`, and a failure of no tracked request goes to `failed(None, event)`.
    """

    def __init__(self, transport: TTSTransport, stall_s: float,
                 decoder: Callable[[str], StreamDecoder] | None = None, audio_format: str = "mp3") -> None:
        self.transport = transport
        self.stall_s = stall_s
        self._decoder_for = decoder
        self._format = audio_format
        self.requests: dict[str, RequestAudio] = {}
        self._pending: dict[str, None] = {}
        self._decoders: dict[str, StreamDecoder] = {}
        self._current: RequestAudio | None = None
        self.start_order: list[str] = []
        self.done_order: list[str] = []
        self.strays = 0
        """Audio outside a started request, or events about a request never tracked."""
        self._closed = False
        self._wake = asyncio.Event()
        self._getter: asyncio.Future[AudioEvent] | None = None
        self._waker: asyncio.Future[object] | None = None

    # --- what the sender says -----------------------------------------------------------------------------------

    def track(self, request_id: str, sent: float | None = None) -> RequestAudio:
        """A request that is (about to be) sent: its events are followed until it finishes."""
        entry = self.requests[request_id] = RequestAudio(request_id, sent)
        self._pending[request_id] = None
        self._wake.set()
        return entry

    def forget(self) -> None:
        """Every outstanding request was cancelled: stop waiting for them, their late events are ignored."""
        self._pending.clear()
        self._decoders.clear()
        self._current = None
        self._wake.set()

    def close(self) -> None:
        """No more requests will be tracked: `run` returns once the outstanding ones have finished."""
        self._closed = True
        self._wake.set()

    @property
    def pending(self) -> list[str]:
        """Ids of requests tracked and not finished, in the order they were tracked."""
        return list(self._pending)

    # --- what it means to the user (override) -------------------------------------------------------------------

    def first_byte(self, entry: RequestAudio) -> None:
        """The first audio byte of a request arrived (entry.first_byte is set)."""

    def audio(self, entry: RequestAudio, samples: Samples) -> None:
        """Decoded samples of a request, in order (never empty)."""

    def timed(self, entry: RequestAudio, words: tuple[WordTiming, ...]) -> None:
        """More of a request's word times arrived (already appended to entry.words)."""

    def finished(self, entry: RequestAudio) -> None:
        """A request's audio is complete (entry.done is set; its decoder's tail was delivered before)."""

    def failed(self, entry: RequestAudio | None, event: AudioFailed) -> None:
        """A tracked request failed (entry.failure is set), or `entry` is None: the event names no request, or one
        this consumer does not follow."""

    # --- reading ------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Read and dispatch events until closed with nothing outstanding. Raises Stalled when the endpoint sends
        nothing for `stall_s` seconds while a request is outstanding (the clock restarts at each event and each
        newly tracked request). Whatever a hook raises ends the reading too."""
        try:
            while not (self._closed and not self._pending):
                event = await self._next()
                if event is not None:
                    self.dispatch(event)
        finally:
            for waiting in (self._getter, self._waker):
                if waiting is not None and not waiting.done():
                    waiting.cancel()  # a cancelled Queue.get loses no event: the next reader gets it
            self._getter = self._waker = None

    async def _next(self) -> AudioEvent | None:
        """The next event, or None when woken by track/forget/close (the caller re-checks where it stands)."""
        getter = self._getter = self._getter or asyncio.ensure_future(self.transport.next_event())
        if not getter.done():
            waker: asyncio.Future[object] = self._waker or asyncio.ensure_future(self._wake.wait())
            self._waker = waker
            await asyncio.wait((getter, waker), timeout=self.stall_s if self._pending else None,
                               return_when=asyncio.FIRST_COMPLETED)
            if waker.done():
                self._waker = None
                self._wake.clear()
            if not getter.done():
                if waker.done():
                    return None
                raise Stalled(f"no audio event for {self.stall_s:.0f} s with {len(self._pending)} request(s) "
                              f"outstanding on the {self.transport.name} transport")
        self._getter = None
        return getter.result()

    def dispatch(self, event: AudioEvent) -> None:
        """Account for one event and call the hook it means (public so a test can feed events by hand)."""
        rid = event.request_id
        entry = None if rid is None else self.requests.get(rid)
        if entry is None:
            if isinstance(event, AudioFailed):
                self.failed(None, event)
            else:
                self.strays += 1
            return
        outstanding = entry.request_id in self._pending
        if isinstance(event, AudioStart):
            entry.starts += 1
            self.start_order.append(entry.request_id)
            self._current = entry
            if outstanding and self._decoder_for is not None:
                self._decoders[entry.request_id] = self._decoder_for(event.format)
        elif isinstance(event, AudioChunk):
            if self._current is not entry or not outstanding:
                self.strays += 1
                if not outstanding:
                    return  # audio of a finished or cancelled request still in flight
            self._chunk(entry, event)
        elif isinstance(event, AudioWords):
            if outstanding:
                entry.words.extend(event.words)
                self.timed(entry, event.words)
        elif isinstance(event, AudioDone):
            entry.dones += 1
            self.done_order.append(entry.request_id)
            self._current = None
            if outstanding:
                self._deliver(entry, self._flush(entry.request_id))
                entry.done = event.at
                entry.timings = event.timings
                del self._pending[entry.request_id]
                self.finished(entry)
        elif outstanding:
            entry.failure = event
            self._decoders.pop(entry.request_id, None)
            del self._pending[entry.request_id]
            self.failed(entry, event)

    def _chunk(self, entry: RequestAudio, event: AudioChunk) -> None:
        entry.bytes += len(event.data)
        entry.chunks += 1
        entry.arrivals.append((event.at, len(event.data)))
        if entry.first_byte is None:
            entry.first_byte = event.at
            self.first_byte(entry)
        if self._decoder_for is not None:
            decoder = self._decoders.get(entry.request_id)
            if decoder is None:  # audio without its start event: the format asked for
                decoder = self._decoders[entry.request_id] = self._decoder_for(self._format)
            self._deliver(entry, decoder.feed(event.data))

    def _flush(self, request_id: str) -> Samples:
        decoder = self._decoders.pop(request_id, None)
        return np.zeros(0, np.float32) if decoder is None else decoder.flush()

    def _deliver(self, entry: RequestAudio, samples: Samples) -> None:
        if samples.size:
            entry.samples += samples.size
            self.audio(entry, samples)
