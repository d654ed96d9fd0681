"""A TTS transport that answers every request with tone audio: `voicecli.tts.base.TTSTransport`, no endpoint.

Why: the pipeline's job is ordering and bookkeeping (sentences out as they complete, audio attributed to its
sentence, cancels that leave the connection usable, stalls turned into advice); that needs a transport that keeps
the interface's contract, not one that synthesizes speech. This one keeps it the way the WebSocket transport does:
one persistent "connection", requests answered strictly in the order sent, AudioStart / AudioChunk... / AudioDone
per request, and no event of a cancelled request once `cancel` has returned. Its audio is real (whole lameenc MP3
frames, or PCM16), so the pipeline's decoder and sink run for real.

A test steers it with:
- `gate`: cleared, no request gets its first audio byte until it is set again (a slow endpoint, or an endpoint
  that went quiet: with a short stall timeout the pipeline must give up with advice);
- `chunk_delay_s`: a pause before each audio chunk (audio arriving over time, so a barge-in can land mid-answer);
- `failures`: a text containing one of its keys is refused with that error code instead of answered;
- `words`: a request that asks for word times gets them (`word_times`: each word a share of the tone by its
  characters), as the session protocol's transports give them.
What it was asked is kept in `sent` and `cancels`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import ClassVar

from tests.fakes.tones import mp3_tone, pcm16_tone
from voicecli.tts.base import (
    AudioChunk,
    AudioDone,
    AudioFailed,
    AudioStart,
    AudioWords,
    SpeechRequest,
    TransportError,
    TTSTransport,
)
from voicecli.wire.protocol import SAMPLE_RATE, Timings, WordTiming

SECONDS_PER_CHAR = 0.02
"""About 50 characters a second: a little faster than speech, so a sentence's audio length still tracks its text."""
MIN_SECONDS = 0.2
FRAMES_PER_CHUNK = 8
"""MP3 frames per AudioChunk (576 samples each: ~0.19 s of audio a chunk, about what the endpoint sends)."""
PCM_CHUNK_BYTES = 9600
"""0.2 s of pcm16 a chunk."""


def audio_seconds(text: str) -> float:
    """How long the tone answering `text` lasts (a test can predict what the sink will hold)."""
    return max(MIN_SECONDS, round(len(text) * SECONDS_PER_CHAR, 3))


def word_times(text: str) -> tuple[WordTiming, ...]:
    """The word times of the tone answering `text`: each word (with the space after it) a share of the tone by its
    characters, tiling it as the endpoint's do."""
    words = text.split()
    total_ms = audio_seconds(text) * 1000
    weights = [len(word) + 1 for word in words]
    times: list[WordTiming] = []
    start = 0.0
    for word, weight in zip(words, weights, strict=True):
        end = start + total_ms * weight / sum(weights)
        times.append(WordTiming(word, start, end))
        start = end
    return tuple(times)


class ToneTransport(TTSTransport):
    """Answers each request with `audio_seconds(text)` of tone, in order (see the module docstring)."""

    name: ClassVar[str] = "tone"
    persistent: ClassVar[bool] = True

    def __init__(self, *, chunk_delay_s: float = 0.0, failures: Mapping[str, str] | None = None,
                 words: bool = False) -> None:
        super().__init__()
        self.words = words
        self.chunk_delay_s = chunk_delay_s
        self.failures = dict(failures or {})
        self.gate = asyncio.Event()
        self.gate.set()
        self.sent: list[SpeechRequest] = []
        self.cancels: list[str | None] = []
        self.connects = 0
        self.closed = False
        self.answered: list[str] = []
        """Ids whose AudioDone (or AudioFailed) was emitted, in order."""
        self._queue: asyncio.Queue[SpeechRequest] = asyncio.Queue()
        self._dropped: set[str] = set()
        self._worker: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        if self.closed:
            raise TransportError("the tone transport was closed")
        self.connects += 1
        if self._worker is None:
            self._worker = asyncio.create_task(self._answer(), name="tone-transport")

    async def send(self, request: SpeechRequest) -> None:
        if self._worker is None or self.closed:
            raise TransportError("the tone transport is not connected: call connect() first")
        self.sent.append(request)
        self._queue.put_nowait(request)

    async def cancel(self, request_id: str | None = None) -> None:
        """Drop one request, or every one not answered yet; none of their events follows (the worker checks
        before each emit, and both run on this loop)."""
        self.cancels.append(request_id)
        pending = {r.request_id for r in self.sent if r.request_id not in self.answered}
        self._dropped |= pending if request_id is None else pending & {request_id}

    async def aclose(self) -> None:
        self.closed = True
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    @property
    def texts(self) -> list[str]:
        """The text of every request sent, in order."""
        return [request.text for request in self.sent]

    def _live(self, request: SpeechRequest) -> bool:
        return request.request_id not in self._dropped

    async def _answer(self) -> None:
        while True:
            request = await self._queue.get()
            if not self._live(request):
                continue
            code = next((code for key, code in self.failures.items() if key in request.text), None)
            if code is not None:
                self._emit(AudioFailed(request.request_id, code, f"the tone transport refuses {request.text!r}"))
                self.answered.append(request.request_id)
                continue
            await self.gate.wait()
            if not self._live(request):
                continue
            seconds = audio_seconds(request.text)
            self._emit(AudioStart(request.request_id, request.format, SAMPLE_RATE))
            if self.words and request.word_timings:
                self._emit(AudioWords(request.request_id, word_times(request.text)))
            if request.format == "pcm16":
                data = pcm16_tone(seconds)
                chunks = [data[at: at + PCM_CHUNK_BYTES] for at in range(0, len(data), PCM_CHUNK_BYTES)]
            else:
                frames = mp3_tone(seconds)
                chunks = [b"".join(frames[at: at + FRAMES_PER_CHUNK])
                          for at in range(0, len(frames), FRAMES_PER_CHUNK)]
            for chunk in chunks:
                if self.chunk_delay_s > 0:
                    await asyncio.sleep(self.chunk_delay_s)
                if not self._live(request):
                    break
                self._emit(AudioChunk(request.request_id, chunk))
            if not self._live(request):
                continue
            timings = Timings(queue_wait_ms=0.0, synthesis_ms=1.0, encoding_ms=0.0, audio_s=seconds,
                              first_audio_ms=1.0, chunks=1)
            self._emit(AudioDone(request.request_id, timings))
            self.answered.append(request.request_id)
