"""The one interface every Kokoro engine implements.

The server never knows which engine it holds: it hands over misaki phonemes, a voice name and a speed, and gets
float32 mono samples at 24 kHz back. Text-to-phoneme conversion (misaki G2P) is shared by all engines and lives
outside them, so both engines see exactly the same phonemes (which is what makes the parity test meaningful).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from voicecli.wire.protocol import SAMPLE_RATE as SAMPLE_RATE  # Kokoro-82M's output rate is the wire's (24 kHz)

Audio = npt.NDArray[np.float32]

BatchItem = tuple[str, str, float]
"""One piece to synthesize: (misaki phonemes, voice, speed)."""


Durations = npt.NDArray[np.int64]
"""Model frames (600 samples each, decoder_parts.FRAME_SAMPLES) per input token."""


@dataclass(frozen=True)
class TimedAudio:
    """Audio plus the predicted duration of every input token, in model frames (600 samples = 25 ms).

    `durations` has one entry per token fed to the model: a boundary token, one per symbol of `symbols` (the
    piece's phoneme symbols in the model's vocabulary, in order), a boundary token. The audio is exactly
    `durations.sum()` frames long. Empty `durations`: the engine could not tell (no word times then). The parity
    test compares the engines' durations.
    """

    audio: Audio
    durations: Durations
    symbols: str = ""


def untimed(audio: Audio) -> TimedAudio:
    """Audio whose token durations are unknown."""
    return TimedAudio(audio, np.zeros(0, dtype=np.int64))


class UnknownVoiceError(ValueError):
    """Raised for a voice name the engine does not have; the message lists the valid ones."""

    def __init__(self, voice: str, valid: tuple[str, ...]) -> None:
        super().__init__(f"unknown voice {voice!r}; valid voices: {', '.join(valid)}")
        self.voice = voice
        self.valid = valid


class Engine(ABC):
    """A loaded Kokoro model that turns phonemes into audio. Not thread-safe: one inference at a time."""

    name: ClassVar[str]
    sample_rate: ClassVar[int] = SAMPLE_RATE
    batches: ClassVar[bool] = False
    """`synthesize_batch` does several items in one pass for less than their separate calls (the scheduler's
    batcher is used only then; see voicecli_endpoint.scheduler)."""
    parts: ClassVar[bool] = False
    """`synthesize_parts` gives a long piece in several parts, the first one early (see
    voicecli_endpoint.engines.decoder_parts); the endpoint asks for it where a listener waits in silence."""

    @property
    @abstractmethod
    def voices(self) -> tuple[str, ...]:
        """The voice names this engine can speak with, sorted."""

    @property
    @abstractmethod
    def device(self) -> str:
        """Where inference runs, e.g. "cpu" or "cuda:0"."""

    @abstractmethod
    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        """Synthesize one chunk of misaki phonemes (at most ~510 symbols) into float32 mono samples."""

    def synthesize_parts(self, phonemes: str, voice: str, speed: float) -> Generator[tuple[Audio, bool]]:
        """The piece's audio in consecutive parts, each computed when it is asked for, with whether it is the last;
        together they are what `synthesize_phonemes` gives, up to the seams. Here one part, the whole piece."""
        yield self.synthesize_phonemes(phonemes, voice, speed), True

    def synthesize_timed(self, phonemes: str, voice: str, speed: float) -> TimedAudio:
        """`synthesize_phonemes` with each token's duration (for word times). Here without them: an engine that
        can tell overrides it."""
        return untimed(self.synthesize_phonemes(phonemes, voice, speed))

    def synthesize_parts_timed(self, phonemes: str, voice: str, speed: float
                               ) -> Generator[tuple[Audio, bool, TimedAudio | None]]:
        """`synthesize_parts` with the piece's durations beside its first part (`TimedAudio.audio` then empty:
        the parts carry the samples), None beside the others. Here without durations."""
        first = True
        for audio, last in self.synthesize_parts(phonemes, voice, speed):
            yield audio, last, untimed(audio[:0]) if first else None
            first = False

    def warm_up(self, phonemes: str, voice: str) -> None:
        """Run one synthesis so the first request does not pay for lazy initialisation (an engine that keeps
        several sessions warms each)."""
        self.synthesize_phonemes(phonemes, voice, 1.0)

    def synthesize_batch(self, items: Sequence[BatchItem]) -> list[Audio]:
        """The audio of each item, in order. Here one call after another; an engine with `batches` overrides it."""
        return [self.synthesize_phonemes(*item) for item in items]

    def check_voice(self, voice: str) -> None:
        """Raise UnknownVoiceError unless `voice` exists."""
        if voice not in self.voices:
            raise UnknownVoiceError(voice, self.voices)


def kokoro_dir(models_dir: Path) -> Path:
    """Directory of the int8 ONNX model and the voices npz (`voicecli models install --only kokoro`)."""
    return models_dir / "kokoro"


def kokoro_torch_dir(models_dir: Path) -> Path:
    """Directory of the torch engine's weights, config.json and voices/*.pt (`--only kokoro-torch`)."""
    return models_dir / "kokoro-torch"
