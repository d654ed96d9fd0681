"""Text -> audio pieces, each yielded the moment the engine has made it; shared by the HTTP and WebSocket routes.

G2P and every piece's inference run as separate jobs on the scheduler, so a long text is interleaved with other
sessions' work instead of holding a worker until it is done. G2P and the first piece of a turn are marked `first`
(a listener is waiting in silence for them); the later pieces are ranked by how much audio the session's listener
still has buffered (its `Playout`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Hashable
from dataclasses import dataclass, field
from functools import partial

from voicecli.playout import Playout
from voicecli_endpoint.chunking import ChunkPolicy, chunk_phonemes
from voicecli_endpoint.engines.base import Audio, Engine
from voicecli_endpoint.g2p import Phonemizer
from voicecli_endpoint.scheduler import CancelToken, FairScheduler

log = logging.getLogger(__name__)

WARMUP_TEXT = "Hello, this is a warm-up."


@dataclass(frozen=True)
class Piece:
    """One synthesized piece of a request's text."""

    audio: Audio
    index: int
    phonemes: str
    queue_wait_s: float
    synthesis_s: float
    """Inference time of this piece, plus G2P time for the first one."""


@dataclass
class Synthesizer:
    engine: Engine
    phonemizer: Phonemizer
    scheduler: FairScheduler
    policy: ChunkPolicy = field(default_factory=ChunkPolicy)
    pieces_synthesized: int = 0

    @property
    def voices(self) -> tuple[str, ...]:
        return self.engine.voices

    def pieces_of(self, text: str) -> list[str]:
        """G2P and chunking, on the calling thread."""
        return chunk_phonemes(self.phonemizer(text), self.policy)

    def synthesize_now(self, text: str, voice: str, speed: float) -> list[Audio]:
        """Every piece of `text`, synchronously on the calling thread (warm-up and in-process measurement)."""
        return [self.engine.synthesize_phonemes(p, voice, speed) for p in self.pieces_of(text)]

    async def warm_up(self, voice: str) -> float:
        """Run a first synthesis so the first real request does not pay for lazy initialisation. Seconds taken."""
        started = time.perf_counter()
        await self.scheduler.run_now(lambda: self.synthesize_now(WARMUP_TEXT, voice, 1.0))
        return time.perf_counter() - started

    async def stream(
        self, key: Hashable, text: str, voice: str, speed: float, token: CancelToken | None = None, *,
        first: bool = True, playout: Playout | None = None,
    ) -> AsyncGenerator[Piece, None]:
        """The audio of `text`, piece by piece. Raises scheduler.JobDropped when cancelled or dropped.

        `first`: this text starts a turn (every POST does; a WebSocket session says when), so its G2P and first
        piece go ahead of other work. `playout`: the session's listener, which ranks its later pieces.
        """
        prepared = await self.scheduler.submit(key, lambda: self.pieces_of(text), token, first=first,
                                               playout=playout)
        extra_wait, extra_run = prepared.queue_wait_s, prepared.run_s
        for index, phonemes in enumerate(prepared.value):
            synthesize = partial(self.engine.synthesize_phonemes, phonemes, voice, speed)
            done = await self.scheduler.submit(key, synthesize, token, first=first and index == 0,
                                               item=(phonemes, voice, speed))
            self.pieces_synthesized += 1
            yield Piece(done.value, index, phonemes, done.queue_wait_s + extra_wait, done.run_s + extra_run)
            extra_wait = extra_run = 0.0
        if not prepared.value:
            log.info("nothing speakable in %r", text[:80])
