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

import numpy as np

from voicecli.wire.playout import Playout
from voicecli.wire.protocol import SAMPLE_RATE
from voicecli_endpoint.chunking import ChunkPolicy, chunk_phonemes
from voicecli_endpoint.engines.base import Audio, Engine, TimedAudio
from voicecli_endpoint.g2p import Phonemizer, Spelled
from voicecli_endpoint.scheduler import CancelToken, FairScheduler, JobDropped, Stepper, Timed
from voicecli_endpoint.word_timing import WordSpan, piece_owners, piece_words

log = logging.getLogger(__name__)

WARMUP_TEXT = "Hello, this is a warm-up of the speech engine, so that the first answer of the day is not slower."
"""Two pieces (the first clause, then a sentence of ~15 words): long enough to size the engine's memory arena for
the pieces answers are made of."""

SILENCE_DBFS = -55.0
"""Below this level a sample counts as silence when trimming (Kokoro's pad silence sits near -80 dBFS)."""
LEAD_KEEP_S = 0.01
"""Silence kept before a piece's first sound: enough not to clip a soft onset (the -55 dBFS gate already sits
below the onset of a fricative; an MP3 stream adds ~46 ms of codec delay in front anyway)."""
TAIL_KEEP_S = 0.25
"""Silence kept after a piece's last sound: with the next piece's lead, a natural ~280 ms pause between
sentences and clauses."""
MID_PHRASE_TAIL_KEEP_S = 0.04
"""Silence kept after a text that stops mid-phrase (its last character is a letter or digit): the client's
adaptive first fragment cuts "The capital of France | is Paris." to start speaking sooner, and a sentence-sized
pause inside a phrase would give the cut away."""


def tail_keep_s(text: str) -> float:
    """The silence to keep after the last piece of `text`: short when the text stops mid-phrase."""
    stripped = text.rstrip()
    return MID_PHRASE_TAIL_KEEP_S if stripped and stripped[-1].isalnum() else TAIL_KEEP_S


def trim_silence(audio: Audio, rate: int, lead_keep_s: float = LEAD_KEEP_S, tail_keep_s: float = TAIL_KEEP_S) -> Audio:
    """Cut the silence Kokoro pads every piece with down to `lead_keep_s` before and `tail_keep_s` after the sound.

    Why: Kokoro surrounds each piece with ~300-390 ms of leading and ~420-500 ms of trailing silence (measured on
    af_heart, 1-10 word pieces). The leading part is pure delay before the listener hears anything, paid on every
    answer's first piece; between sentences the two together made ~800 ms gaps. A piece with no sound is kept
    as it is (it is rare, and an empty piece would change what a client receives).
    """
    trimmer = SilenceTrimmer(rate, lead_keep_s, tail_keep_s)
    return np.concatenate([trimmer.feed(audio), trimmer.finish()])


class SilenceTrimmer:
    """`trim_silence` for a piece that arrives in parts (decoder_parts.py): each part's samples go out as soon as
    it is known they are kept. Leading silence is dropped until the first sound; silence at the end of a part is
    held back until a later part shows whether sound follows it (kept whole) or not (cut to `tail_keep_s`)."""

    def __init__(self, rate: int, lead_keep_s: float = LEAD_KEEP_S, tail_keep_s: float = TAIL_KEEP_S) -> None:
        self._lead_keep = round(lead_keep_s * rate)
        self._tail_keep = round(tail_keep_s * rate)
        self._held: list[Audio] = []
        """Samples not yet known to be kept: all of them before the first sound, the trailing silence after."""
        self._sounded = False
        self._fed = 0
        self.lead_dropped = 0
        """Samples dropped before the first one kept (word times are shifted by it)."""

    def feed(self, audio: Audio) -> Audio:
        """The samples of `audio` (and of earlier parts) that are now known to be kept."""
        loud = np.flatnonzero(np.abs(audio) > 10 ** (SILENCE_DBFS / 20))
        self._fed += len(audio)
        if loud.size == 0:
            self._held.append(audio)
            return audio[:0]
        held = np.concatenate([*self._held, audio]) if self._held else audio
        first, last = int(loud[0]) + len(held) - len(audio), int(loud[-1]) + len(held) - len(audio)
        start = 0 if self._sounded else max(0, first - self._lead_keep)
        if not self._sounded:
            self.lead_dropped = self._fed - len(held) + start
        self._sounded = True
        self._held = [held[last + 1:]]
        return held[start: last + 1]

    def finish(self) -> Audio:
        """What is kept of the held samples once the piece has ended; all of a piece that never sounded."""
        held = np.concatenate(self._held) if self._held else np.zeros(0, np.float32)
        self._held = []
        return held[: self._tail_keep] if self._sounded else held


@dataclass(frozen=True)
class Piece:
    """One synthesized piece of a request's text."""

    audio: Audio
    index: int
    phonemes: str
    queue_wait_s: float
    synthesis_s: float
    """Inference time of this piece, plus G2P time for the first one."""
    words: tuple[WordSpan, ...] = ()
    """When word times were asked for: words starting in the piece, in samples from the piece's first sample sent;
    with its last audio, or for a piece sent in parts all but its last word with the first part
    (voicecli_endpoint.word_timing.piece_words)."""


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

    def pieces_of(self, text: str, token: CancelToken | None = None) -> list[str]:
        """G2P and chunking, on the calling thread. Raises JobDropped between two G2P segments once `token` is
        cancelled (a long text's G2P is abandoned within one segment's time, see voicecli_endpoint.g2p)."""
        def unless_cancelled() -> None:
            if token is not None and token.cancelled:
                raise JobDropped

        return chunk_phonemes(self.phonemizer(text, unless_cancelled), self.policy)

    def spelled_pieces_of(self, text: str, token: CancelToken | None = None) -> tuple[Spelled, list[str]]:
        """`pieces_of` with the spelling they were cut from (which word each phoneme spells)."""
        def unless_cancelled() -> None:
            if token is not None and token.cancelled:
                raise JobDropped

        spelled = self.phonemizer.spell(text, unless_cancelled)
        return spelled, chunk_phonemes(spelled.phonemes, self.policy)

    def synthesize_now(self, text: str, voice: str, speed: float) -> list[Audio]:
        """Every piece of `text`, synchronously on the calling thread (warm-up and in-process measurement)."""
        return [self.engine.synthesize_phonemes(p, voice, speed) for p in self.pieces_of(text)]

    async def warm_up(self, voice: str) -> float:
        """Run a first synthesis so the first real request does not pay for lazy initialisation. Seconds taken."""
        started = time.perf_counter()
        def warm_every_piece() -> None:
            for phonemes in self.pieces_of(WARMUP_TEXT):
                self.engine.warm_up(phonemes, voice)

        await self.scheduler.run_now(warm_every_piece)
        return time.perf_counter() - started

    async def stream(
        self, key: Hashable, text: str, voice: str, speed: float, token: CancelToken | None = None, *,
        first: bool = True, playout: Playout | None = None, timed: bool = False,
    ) -> AsyncGenerator[Piece, None]:
        """The audio of `text`, piece by piece. Raises scheduler.JobDropped when cancelled or dropped.

        `first`: this text starts a turn (every POST does; a WebSocket session says when), so its G2P and first
        piece go ahead of other work. `playout`: the session's listener, which ranks its later pieces. `timed`:
        the Pieces carry their words' times (Piece.words; voicecli_endpoint.word_timing).
        """
        prepared = await self.scheduler.submit(key, lambda: self.spelled_pieces_of(text, token), token, first=first,
                                               playout=playout)
        spelled, pieces = prepared.value
        owners = piece_owners(spelled, pieces) if timed else [None] * len(pieces)
        extra_wait, extra_run = prepared.queue_wait_s, prepared.run_s
        last = len(pieces) - 1
        timed_up_to = -1  # the last word already timed
        for index, phonemes in enumerate(pieces):
            trimmer = SilenceTrimmer(SAMPLE_RATE, tail_keep_s=tail_keep_s(text) if index == last else TAIL_KEEP_S)
            starts_turn = first and index == 0
            kept = 0
            durations: TimedAudio | None = None
            timed_before = timed_up_to  # the last word timed before this piece
            async for done, complete in self._synthesize(key, phonemes, voice, speed, token, in_parts=starts_turn,
                                                         timed=owners[index] is not None):
                raw, timing = done.value
                durations = timing if timing is not None else durations
                audio = trimmer.feed(raw)
                if complete:
                    audio = np.concatenate([audio, trimmer.finish()])
                extra_wait, extra_run = extra_wait + done.queue_wait_s, extra_run + done.run_s
                kept += audio.size
                words: tuple[WordSpan, ...] = ()
                owner = owners[index]
                if owner is not None and durations is not None and len(durations.durations) and \
                        (complete or kept > 0):
                    now = piece_words(spelled, owner, phonemes, durations, timed_before, trimmer.lead_dropped, kept,
                                      complete)
                    words = tuple(word for word in now if word.index > timed_up_to)  # none sent twice
                    timed_up_to = max([timed_up_to, *(word.index for word in words)])
                if audio.size == 0 and not words:  # silence held back (or no samples): nothing to send yet
                    continue
                yield Piece(audio, index, phonemes, extra_wait, extra_run, words)
                extra_wait = extra_run = 0.0
            self.pieces_synthesized += 1
        if not pieces:  # the user's words are theirs: their text is logged at DEBUG only
            log.info("a text of %d characters has nothing speakable: the answer holds no audio", len(text))
            log.debug("nothing speakable in %r", text[:80])

    async def _synthesize(self, key: Hashable, phonemes: str, voice: str, speed: float, token: CancelToken | None, *,
                          in_parts: bool, timed: bool = False
                          ) -> AsyncGenerator[tuple[Timed[tuple[Audio, TimedAudio | None]], bool], None]:
        """One piece as scheduler jobs: ((its audio, its durations or None), whether the piece is complete with it),
        once or part by part. Durations only when `timed`, and with the first part.

        `in_parts` (a turn's first piece, with an engine that can): one job per part, the first ranked first, the
        later ones by the listener's buffered audio like any piece (decoder_parts.py says why). A timed piece is
        never batched with others' (the batch call gives no durations).
        """
        if not (in_parts and self.engine.parts):
            if timed:
                timing = await self.scheduler.submit(key, partial(self.engine.synthesize_timed, phonemes, voice, speed),
                                                     token, first=in_parts)
                yield Timed((timing.value.audio, timing.value), timing.queue_wait_s, timing.run_s), True
                return
            synthesize = partial(self.engine.synthesize_phonemes, phonemes, voice, speed)
            done = await self.scheduler.submit(key, synthesize, token, first=in_parts, item=(phonemes, voice, speed))
            yield Timed((done.value, None), done.queue_wait_s, done.run_s), True
            return
        parts = Stepper(self.engine.synthesize_parts_timed(phonemes, voice, speed))
        try:
            part = await self.scheduler.submit(key, parts.step, token, first=True)
            while True:
                audio, last, durations = part.value
                yield Timed((audio, durations if timed else None), part.queue_wait_s, part.run_s), last
                if last:
                    return
                part = await self.scheduler.submit(key, parts.step, token)
        finally:
            parts.close()  # from the event loop, while a worker may be running a step: Stepper makes that safe
