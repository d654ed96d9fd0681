"""The input half of the data flow: microphone -> endpointing -> transcription -> a spoken turn.

It also decides when the user talks over the assistant (barge-in). Outside browsers there is no echo cancellation,
so by default the microphone is gated while the assistant speaks: blocks reach the endpointer only when the input
is clearly louder than what is being played (`echo_margin_db` above the playback level). Speech that passes the gate
is a barge-in: the app stops playback at once and answers the new turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from voicecli.capture import AudioBlock, Microphone, rms_dbfs
from voicecli.config import Config
from voicecli.endpointing import Endpointer, PushToTalk, SpeechEnded, SpeechStarted, TurnEvent
from voicecli.transcription import Transcript, TurnTranscriber


@dataclass(frozen=True)
class SpokenTurn:
    """What the user said, with the turn's input-side latency marks (speech_start, speech_end, transcript_ready)."""

    text: str
    marks: dict[str, float]
    audio_s: float


@dataclass(frozen=True)
class BargeIn:
    """Speech passed the echo gate while the assistant was speaking."""

    at: float


@dataclass(frozen=True)
class InputLevel:
    """The microphone's level in dBFS, at most ten times a second (for the level meter)."""

    db: float
    gated: bool


@dataclass(frozen=True)
class HeardNothing:
    """A turn was detected but transcribed to nothing (a cough, a door): no answer is given."""

    audio_s: float


ListenEvent = SpokenTurn | BargeIn | InputLevel | HeardNothing


@dataclass
class EchoGate:
    """Lets microphone audio through while the assistant speaks only when it is clearly louder than the playback."""

    enabled: bool = True
    margin_db: float = 6.0
    is_speaking: Callable[[], bool] = field(default=lambda: False)
    playback_db: Callable[[], float] = field(default=lambda: -120.0)

    def passes(self, level_db: float) -> bool:
        if not self.enabled or not self.is_speaking():
            return True
        return level_db > self.playback_db() + self.margin_db


class Listener:
    """Runs until cancelled, turning microphone blocks into ListenEvents for `on_event`."""

    def __init__(
        self,
        microphone: Microphone,
        detector: Endpointer | PushToTalk,
        transcriber: TurnTranscriber,
        on_event: Callable[[ListenEvent], None],
        gate: EchoGate | None = None,
    ) -> None:
        self.microphone = microphone
        self.detector = detector
        self.transcriber = transcriber
        self._on_event = on_event
        self.gate = gate or EchoGate()
        self._speech_start: float | None = None
        self._last_level = 0.0
        self._pending: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        self.microphone.start()
        try:
            async for block in self.microphone.blocks():
                self._block(block)
        finally:
            self.microphone.stop()
            for task in self._pending:
                task.cancel()

    def use_detector(self, detector: Endpointer | PushToTalk) -> None:
        """Switch between voice activity detection and push-to-talk (the F2 key)."""
        self.detector = detector
        self._speech_start = None

    def press(self) -> None:
        """Push-to-talk pressed (only meaningful with a PushToTalk detector)."""
        if isinstance(self.detector, PushToTalk):
            started = self.detector.press()
            if started is not None:
                self._event(started)

    def release(self) -> None:
        if isinstance(self.detector, PushToTalk):
            ended = self.detector.release()
            if ended is not None:
                self._event(ended)

    def _block(self, block: AudioBlock) -> None:
        level = rms_dbfs(block.samples)
        passes = self.gate.passes(level)
        if block.at - self._last_level >= 0.1:
            self._last_level = block.at
            self._on_event(InputLevel(level, not passes))
        samples = block.samples
        if not passes and not isinstance(self.detector, PushToTalk):
            samples = np.zeros_like(samples)  # gated: the detector hears silence, so a turn in progress still ends
        for event in self.detector.feed(samples, block.at):
            self._event(event)

    def _event(self, event: TurnEvent) -> None:
        if isinstance(event, SpeechStarted):
            self._speech_start = event.at
            if self.gate.is_speaking():
                self._on_event(BargeIn(event.at))
        future = self.transcriber.observe(event)
        if isinstance(event, SpeechEnded) and future is not None:
            marks = {"speech_start": self._speech_start or event.last_speech_at, "speech_end": event.last_speech_at}
            task = asyncio.ensure_future(self._finish(future, marks, len(event.audio) / 16_000))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _finish(self, future: asyncio.Future[Transcript], marks: dict[str, float], audio_s: float) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await future
            marks["transcript_ready"] = time.monotonic()
            if transcript.text.strip():
                self._on_event(SpokenTurn(transcript.text.strip(), marks, audio_s))
            else:
                self._on_event(HeardNothing(audio_s))


def make_detector(input_mode: str, silence_ms: int) -> Endpointer | PushToTalk:
    return PushToTalk() if input_mode == "push_to_talk" else Endpointer(silence_ms=silence_ms)


def open_listener(
    config: Config, on_event: Callable[[ListenEvent], None], gate: EchoGate | None = None
) -> Listener:
    """Microphone, detector and a warmed-up Whisper model from config. Raises NoMicrophoneError (typing still works)
    or WhisperModelMissing (names the install command). Blocking (~1-2 s): call it via asyncio.to_thread."""
    from voicecli.transcription import Transcriber

    wanted = config.get_str("audio.input_device")
    microphone = Microphone(int(wanted) if wanted.isdigit() else (wanted or None))
    transcriber = Transcriber(
        config.get_str("stt.model"),
        beam_size=config.get_int("stt.beam_size"),
        device=config.get_str("stt.device"),
        compute_type=config.get_str("stt.compute_type"),
        threads=config.get_int("stt.threads"),
        language=config.get_str("stt.language") or None,
        models_dir=config.models_dir,
    )
    transcriber.warm_up()
    detector = make_detector(config.get_str("audio.input_mode"), config.get_int("audio.vad_silence_ms"))
    return Listener(microphone, detector, TurnTranscriber(transcriber), on_event, gate)
