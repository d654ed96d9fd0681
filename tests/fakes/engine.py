"""An instant synthesis engine: `voicecli_endpoint.engines.base.Engine` answering with a tone per phoneme count.

Why: the endpoint's session, scheduler, synthesizer and encoders decide what a client receives and when (order,
cancels, queue limits, closing); none of that depends on what Kokoro makes of the phonemes. A tone whose length
follows the phoneme count keeps the part that matters (a longer piece is longer audio, the same piece is the same
audio) and costs microseconds instead of a model load and seconds of inference. Kokoro itself stays tested by
the slow tier.

Like the onnx engine it can give a piece in parts (`parts`, see voicecli_endpoint.engines.decoder_parts): the
endpoint asks for that only for the first piece of a turn, so a client can see from the parts which requests the
session took for a turn's start.

The engine runs on the endpoint's worker threads while the test drives the client, so it has a gate a test can
close to hold syntheses mid-flight (`held()`, optionally letting a few steps through first), and counts the steps
it started (`wait_for_calls`): a cancel can then be sent while a piece is provably being synthesized, with no
timing guess.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Generator, Iterator

import numpy as np
from voicecli_endpoint.engines.base import Audio, Engine, TimedAudio
from voicecli_endpoint.engines.decoder_parts import FRAME_SAMPLES

from tests.fakes.tones import tone

VOICES = ("af_bella", "af_heart", "am_adam", "am_michael", "bf_emma")
"""A few of Kokoro's names (sorted, as Engine.voices promises): the defaults and what tests name are among them."""
SECONDS_PER_SYMBOL = 0.012
"""About Kokoro's pace (~5 symbols a word, ~3 words a second); long enough that a piece is a few MP3 frames."""
PARTS = 3
"""A piece asked for in parts comes in this many."""
GATE_TIMEOUT_S = 30.0
"""A held step goes on by itself after this long: a test that forgot to open the gate fails, never hangs."""


class ToneEngine(Engine):
    """Phonemes -> `SECONDS_PER_SYMBOL` of tone per symbol (spaces excluded), divided by the speed; one pitch per
    voice. Thread-safe, as the endpoint's parallel workers need."""

    name = "tone"
    parts = True

    def __init__(self, voices: tuple[str, ...] = VOICES) -> None:
        self._voices = tuple(sorted(voices))
        self._lock = threading.Condition()
        self._allowance: int | None = None
        """Steps that may still start while held (None: not held)."""
        self.calls: list[tuple[str, str, float]] = []
        """(phonemes, voice, speed) of every step started (a whole piece, or one part), in order, warm-up included."""

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    @property
    def device(self) -> str:
        return "cpu"

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        self.check_voice(voice)
        self._step(phonemes, voice, speed)
        return self._tone(phonemes, voice, speed)

    def synthesize_parts(self, phonemes: str, voice: str, speed: float) -> Generator[tuple[Audio, bool]]:
        """The piece's tone in PARTS consecutive slices, each one a step of its own (held like a whole piece)."""
        self.check_voice(voice)
        whole = self._tone(phonemes, voice, speed)
        slices = np.array_split(whole, PARTS)
        for index, part in enumerate(slices):
            self._step(phonemes, voice, speed)
            yield part, index == len(slices) - 1

    def synthesize_timed(self, phonemes: str, voice: str, speed: float) -> TimedAudio:
        """The tone with durations as Kokoro gives them: every symbol (spaces too) a share of the tone's frames,
        no boundary frames, so word times are exact for the tone."""
        return self._timed(self.synthesize_phonemes(phonemes, voice, speed), phonemes)

    def synthesize_parts_timed(self, phonemes: str, voice: str, speed: float
                               ) -> Generator[tuple[Audio, bool, TimedAudio | None]]:
        first = True
        for part, last in self.synthesize_parts(phonemes, voice, speed):
            yield part, last, self._timed(self._tone(phonemes, voice, speed), phonemes, part[:0]) if first else None
            first = False

    @staticmethod
    def _timed(audio: Audio, phonemes: str, carried: Audio | None = None) -> TimedAudio:
        frames = round(len(audio) / FRAME_SAMPLES)
        cuts = np.round(np.linspace(0, frames, len(phonemes) + 1)).astype(np.int64)
        durations = np.concatenate([[0], np.diff(cuts), [0]]).astype(np.int64)
        return TimedAudio(audio if carried is None else carried, durations, phonemes)

    def _tone(self, phonemes: str, voice: str, speed: float) -> Audio:
        symbols = sum(1 for symbol in phonemes if not symbol.isspace())
        return tone(symbols * SECONDS_PER_SYMBOL / speed, 220.0 + 40.0 * self._voices.index(voice))

    def _step(self, phonemes: str, voice: str, speed: float) -> None:
        """Count the step, then pass the gate (waiting while it is held and this step is not let through)."""
        deadline = time.monotonic() + GATE_TIMEOUT_S
        with self._lock:
            self.calls.append((phonemes, voice, speed))
            self._lock.notify_all()
            while self._allowance == 0 and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            if self._allowance:
                self._allowance -= 1

    @contextlib.contextmanager
    def held(self, allow: int = 0) -> Iterator[None]:
        """Inside the block only `allow` more steps start; the others wait until the block ends."""
        with self._lock:
            self._allowance = allow
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        """Open the gate (the endpoint fixture does, before it stops the server)."""
        with self._lock:
            self._allowance = None
            self._lock.notify_all()

    def wait_for_calls(self, count: int, timeout_s: float = 10.0) -> bool:
        """Block until `count` steps have started in all (a thread's wait: from a test's event loop, call it
        through asyncio.to_thread)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self.calls) >= count, timeout_s)
