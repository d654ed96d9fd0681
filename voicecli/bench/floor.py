"""The in-process floor: the work the endpoint must do before its first audio byte, with no transport at all.

G2P of the first sentence, the endpoint's own chunking, inference of the first piece's first part (a turn's first
piece is decoded in parts where the engine can: voicecli_endpoint.engines.decoder_parts) and its MP3 encoding, in
this process, with the same engine and thread count as the endpoint (read from its /stats). The time from
sending the first sentence over the WebSocket to its first audio byte, minus this, is what the transport, the
server's event loop and its scheduler cost: the number the post's transport optimisation is about.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class FloorResult:
    ms: float
    g2p_ms: float
    inference_ms: float
    encode_ms: float
    first_piece: str


class Floor:
    """An engine loaded in the bench process (seconds and a few hundred MB: loaded once per bench)."""

    def __init__(self, engine: Any, phonemizer: Any, engine_name: str, threads: int) -> None:
        self._engine = engine
        self._phonemizer = phonemizer
        self.engine_name = engine_name
        self.threads = threads

    @classmethod
    async def load(cls, engine_name: str, models_dir: Path, threads: int) -> Floor:
        from voicecli_endpoint.engines.select import load_engine
        from voicecli_endpoint.g2p import Phonemizer

        engine = await asyncio.to_thread(load_engine, engine_name, models_dir, threads)
        phonemizer = await asyncio.to_thread(Phonemizer)
        floor = cls(engine, phonemizer, engine.name, threads)
        await asyncio.to_thread(floor.measure, "Warming up the in-process engine.", "af_heart", 1.0)
        return floor

    def measure(self, text: str, voice: str, speed: float) -> FloorResult:
        """Synchronous: G2P -> chunking -> first part of the first piece -> MP3 encoding, timed."""
        from voicecli_endpoint.audio_encoding import stream_encoder
        from voicecli_endpoint.chunking import ChunkPolicy, chunk_phonemes

        started = time.perf_counter()
        pieces = chunk_phonemes(self._phonemizer(text), ChunkPolicy())
        if not pieces:
            raise ValueError(f"nothing speakable in {text!r}")
        phonemized = time.perf_counter()
        parts = self._engine.synthesize_parts(pieces[0], voice, speed)
        audio, _ = next(parts)
        parts.close()
        inferred = time.perf_counter()
        encoder = stream_encoder("mp3")
        messages = encoder.encode(audio) or encoder.flush()
        if not messages:
            raise ValueError("the encoder produced no audio")
        done = time.perf_counter()
        return FloorResult((done - started) * 1000, (phonemized - started) * 1000, (inferred - phonemized) * 1000,
                           (done - inferred) * 1000, pieces[0])

    async def ameasure(self, text: str, voice: str, speed: float) -> FloorResult:
        return await asyncio.to_thread(self.measure, text, voice, speed)
