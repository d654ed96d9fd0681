"""`voicecli chat`: the TUI by default, or headless for scripts, demos and tests.

Headless forms:
- `--text "..."`: one typed turn, then exit;
- `--wav in.wav [--out reply.wav]`: one spoken turn from a file (transcribed locally), answer saved or played;
- `--no-tui`: a conversation on stdin and the microphone (when there is one).
Each writes its turns on stdout as JSON lines (voicecli.converse.turn_lines: turn_started, turn_finished with the
turn's timeline, turn_failed), for scripts and `voicecli bench turns`; stderr shows the same conversation as prose
(`you>`, `assistant>`, the latency summary) for a person watching.

All share one session (voicecli.converse.session) and one pipeline; they differ only in how turns come in and how
answers and latency are shown.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from voicecli.audio.wav import load_wav_16k, save_wav
from voicecli.config import Config
from voicecli.converse.pipeline import (
    PipelineEvent,
    SpeculationState,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)
from voicecli.converse.session import STARTUP_ERRORS, Session, start_session
from voicecli.converse.timeline import KEY_SPANS, TurnTimeline
from voicecli.converse.turn_lines import TurnLine, line_of
from voicecli.converse.turn_taking import TurnTaker
from voicecli.playback.sinks import CollectingSink
from voicecli.wire.protocol import SAMPLE_RATE


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
        """The transcript: a JSON line on stdout per turn started (a speculative one only once confirmed),
        finished or failed; the same as prose on stderr."""
        line = line_of(event)
        if line is not None:
            print(line.encode(), flush=True)
        if isinstance(event, TurnStarted):
            print(f"you{' (spoken)' if event.origin == 'spoken' else ''}> {event.user_text}", file=sys.stderr,
                  flush=True)
        elif isinstance(event, SpeculationState) and event.state != "confirmed":
            self.log(f"speculative answer {event.state}")
        elif isinstance(event, TurnFailed):
            self.failed = True
            print(f"voicecli: error: {event.message}", file=sys.stderr, flush=True)
        elif isinstance(event, TurnFinished):
            print(f"assistant> {event.answer.strip() or '(no answer)'}", file=sys.stderr, flush=True)
            print(summary(event.timeline), file=sys.stderr, flush=True)
            self.done += 1
            if self.args.turns and self.done >= self.args.turns:
                self.finished.set()

    async def run(self) -> int:
        args = self.args
        try:
            started = await start_session(self.config, mute=args.mute, out=args.out, progress=self.log,
                                          on_event=self.on_event)
        except STARTUP_ERRORS as exc:
            print(f"voicecli: error: {exc}", file=sys.stderr)
            return 2
        assert started is not None  # nothing here goes away while it starts
        self.session, audio_note = started
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
        sink = self.session.pipeline.sink
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
        from voicecli.listen.listener import (
            BargeIn,
            HoldVoice,
            ListenEvent,
            ReleaseVoice,
            VoiceOff,
            open_gated_listener,
        )

        assert self.session is not None and self.taker is not None
        pipeline = self.session.pipeline
        taker = self.taker

        def on_listen(event: ListenEvent) -> None:
            taker.on_listen(event)
            if isinstance(event, BargeIn):
                stopped = time.monotonic()
                print(TurnLine("barge_in", 0, "", at=event.at).encode(), flush=True)
                self.log(f"barge-in: playback stopped {(stopped - event.at) * 1000:.0f} ms after speech was detected")
            elif isinstance(event, HoldVoice | ReleaseVoice):
                held = isinstance(event, HoldVoice)
                print(TurnLine("voice_held" if held else "voice_released", 0, "", at=event.at).encode(), flush=True)

        listener = await open_gated_listener(self.config, on_listen, lambda: pipeline.speaking, pipeline.sink)
        if isinstance(listener, VoiceOff):
            self.log(listener.reason)
            return None
        for note in listener.notes:
            self.log(note)
        self._listening = True
        self.log(f"listening on {listener.microphone.device_name} ({self.config.audio.input_mode})")
        return asyncio.create_task(listener.run())

    async def _wav_turn(self, path: Path) -> None:
        from voicecli.listen.transcription import transcriber_from_config

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
    from voicecli.tui.chat_app import VoiceChatApp

    app = VoiceChatApp(config, mute=args.mute)
    app.run()
    return app.return_code or 0
