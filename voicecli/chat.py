"""`voicecli chat`: the TUI by default, or headless for scripts, demos and tests.

Headless forms:
- `--text "..."`: one typed turn, then exit;
- `--wav in.wav [--out reply.wav]`: one spoken turn from a file (transcribed locally), answer saved or played;
- `--no-tui`: a conversation on stdin and the microphone (when there is one), logged to stdout: `you>` lines,
  `assistant>` lines, and one `timeline {json}` line per turn.

All share one session (voicecli.session) and one pipeline; they differ only in how turns come in and how answers
and latency are shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voicecli.config import Config
from voicecli.endpointing import SAMPLE_RATE as SPEECH_RATE
from voicecli.llm import LLMError
from voicecli.local_endpoint import EndpointStartError
from voicecli.pipeline import (
    AudioSink,
    CollectingSink,
    PipelineEvent,
    Speculation,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)
from voicecli.protocol import SAMPLE_RATE
from voicecli.session import Session, open_session
from voicecli.timeline import KEY_SPANS, TurnTimeline
from voicecli.tts.base import TransportError
from voicecli.turn_taking import TurnTaker

STARTUP_ERRORS = (TransportError, EndpointStartError, LLMError, OSError)


def make_sink(config: Config, mute: bool, out: Path | None) -> tuple[AudioSink, str]:
    """The speaker when there is one; otherwise keep the audio (saved with --out) and say why nothing is heard."""
    if mute or out is not None:
        return CollectingSink(), "muted" if mute else f"saving to {out}"
    try:
        from voicecli.speaker import open_speaker

        return open_speaker(config), "speaker"
    except Exception as exc:  # no PortAudio, no device, device busy: typing and answers still work
        return CollectingSink(), f"no audio output ({exc}); answers are shown, not played"


def save_wav(path: Path, samples: npt.NDArray[np.float32]) -> None:
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.tobytes())


def load_wav_16k(path: Path) -> npt.NDArray[np.float32]:
    """A WAV file as 16 kHz mono float32, the rate Whisper and the endpointer work at."""
    import soundfile

    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError) as exc:
        raise OSError(f"cannot read {path} as audio: {exc}") from exc
    mono = data.mean(axis=1)
    if rate != SPEECH_RATE:
        positions = np.arange(0, len(mono) * SPEECH_RATE / rate) * rate / SPEECH_RATE
        mono = np.interp(positions, np.arange(len(mono)), mono).astype(np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)


def summary(timeline: TurnTimeline) -> str:
    parts = []
    for label, start, end in KEY_SPANS:
        value = timeline.ms(start, end)
        if value is not None:
            parts.append(f"{label}: {value:.0f} ms")
    return f"[{timeline.mode}] " + ", ".join(parts)


class Headless:
    """One headless conversation: turns from stdin, a WAV file, or the microphone, answered in order."""

    def __init__(self, args: argparse.Namespace, config: Config) -> None:
        self.args = args
        self.config = config
        self.failed = False
        self.session: Session | None = None
        self.taker: TurnTaker | None = None
        self.done = 0
        self.finished = asyncio.Event()
        self._listening = False

    def log(self, message: str) -> None:
        print(f"... {message}", file=sys.stderr, flush=True)

    def on_event(self, event: PipelineEvent) -> None:
        """The transcript on stdout: `you>` when a turn is answered (a speculative one only once confirmed),
        `assistant>` and its `timeline {json}` when it is done."""
        if isinstance(event, TurnStarted):
            print(f"you{' (spoken)' if event.origin == 'spoken' else ''}> {event.user_text}", flush=True)
        elif isinstance(event, Speculation) and event.state != "confirmed":
            self.log(f"speculative answer {event.state}")
        elif isinstance(event, TurnFailed):
            self.failed = True
            print(f"voicecli: error: {event.message}", file=sys.stderr, flush=True)
        elif isinstance(event, TurnFinished):
            print(f"assistant> {event.answer.strip() or '(no answer)'}", flush=True)
            print("timeline " + json.dumps(event.timeline.to_json()), flush=True)
            print(summary(event.timeline), file=sys.stderr, flush=True)
            self.done += 1
            if self.args.turns and self.done >= self.args.turns:
                self.finished.set()

    async def run(self) -> int:
        args = self.args
        sink, audio_note = make_sink(self.config, args.mute, args.out)
        try:
            self.session = await open_session(self.config, sink, self.log, self.on_event)
        except STARTUP_ERRORS as exc:
            print(f"voicecli: error: {exc}", file=sys.stderr)
            return 2
        self.log(audio_note)
        sources: list[asyncio.Task[None]] = []
        try:
            async with TurnTaker(self.session.pipeline, self.config.audio.speculative_answers) as taker:
                self.taker = taker
                if args.text is not None:
                    taker.submit(args.text)
                    await taker.drained()
                elif args.wav is not None:
                    await self._wav_turn(args.wav)
                    await taker.drained()
                else:
                    listening = await self._start_listening()  # first: stdin at EOF must not end a spoken session
                    if listening is not None:
                        sources.append(listening)
                    sources.append(asyncio.create_task(self._typed()))
                    await self.finished.wait()
        finally:
            for task in sources:
                task.cancel()
            await self.session.aclose()
        if args.out is not None and isinstance(sink, CollectingSink):
            save_wav(args.out, sink.audio())
            self.log(f"saved {sink.audio().size / SAMPLE_RATE:.2f} s of audio to {args.out}")
        return 2 if self.failed else 0

    async def _typed(self) -> None:
        assert self.taker is not None
        while True:
            try:
                line = await asyncio.to_thread(sys.stdin.readline)
            except (OSError, ValueError):
                line = ""
            if not line:  # end of input: wait for spoken turns if listening, else finish what was asked
                if not self._listening:
                    await self.taker.drained()
                    self.finished.set()
                return
            if line.strip():
                self.taker.submit(line.strip())

    async def _start_listening(self) -> asyncio.Task[None] | None:
        from voicecli.capture import NoMicrophoneError
        from voicecli.listening import BargeIn, EchoGate, ListenEvent, open_listener
        from voicecli.transcription import WhisperModelMissing

        assert self.session is not None and self.taker is not None
        pipeline = self.session.pipeline
        taker = self.taker
        sink = pipeline.sink
        gate = EchoGate(self.config.audio.echo_gate, self.config.audio.echo_margin_db,
                        lambda: pipeline.speaking, getattr(sink, "level_db", lambda: -120.0))

        def on_listen(event: ListenEvent) -> None:
            taker.on_listen(event)
            if isinstance(event, BargeIn):
                stopped = time.monotonic()
                self.log(f"barge-in: playback stopped {(stopped - event.at) * 1000:.0f} ms after speech was detected")

        try:
            listener = await asyncio.to_thread(open_listener, self.config, on_listen, gate)
        except NoMicrophoneError as exc:
            self.log(f"no microphone ({exc}): typing still works")
            return None
        except WhisperModelMissing as exc:
            self.log(f"voice input is off: {exc}")
            return None
        self._listening = True
        self.log(f"listening on {listener.microphone.device_name} ({self.config.audio.input_mode})")
        return asyncio.create_task(listener.run())

    async def _wav_turn(self, path: Path) -> None:
        from voicecli.transcription import transcriber_from_config

        audio = load_wav_16k(path)
        transcriber = await asyncio.to_thread(transcriber_from_config, self.config)
        speech_end = time.monotonic()
        transcript = await transcriber.transcribe(audio)
        transcriber.close()
        marks = {"speech_end": speech_end, "transcript_ready": time.monotonic()}
        if not transcript.text.strip():
            raise OSError(f"no speech recognised in {path}")
        assert self.taker is not None
        self.taker.submit(transcript.text.strip(), "spoken", marks)


def run_chat(args: argparse.Namespace, config: Config) -> int:
    if args.no_tui or args.text is not None or args.wav is not None:
        try:
            return asyncio.run(Headless(args, config).run())
        except OSError as exc:
            print(f"voicecli: error: {exc}", file=sys.stderr)
            return 2
    from voicecli.tui.app import VoiceChatApp

    app = VoiceChatApp(config, mute=args.mute)
    app.run()
    return app.return_code or 0
