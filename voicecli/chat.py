"""`voicecli chat`: the TUI by default, or headless (`--no-tui` line mode, `--text` one turn) for scripts and demos.

All three share one session (voicecli.session) and one pipeline; they differ only in how a turn is typed in and how
the answer and its latency are shown.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import wave
from pathlib import Path

import numpy as np

from voicecli.config import Config
from voicecli.llm import LLMError
from voicecli.local_endpoint import EndpointStartError
from voicecli.pipeline import AudioSink, CollectingSink, PipelineEvent, TurnFailed, TurnFinished
from voicecli.protocol import SAMPLE_RATE
from voicecli.session import open_session
from voicecli.timeline import KEY_SPANS, TurnTimeline
from voicecli.tts.base import TransportError

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


def save_wav(path: Path, samples: np.ndarray) -> None:
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(pcm.tobytes())


def summary(timeline: TurnTimeline) -> str:
    parts = []
    for label, start, end in KEY_SPANS:
        value = timeline.ms(start, end)
        if value is not None:
            parts.append(f"{label}: {value:.0f} ms")
    return f"[{timeline.mode}] " + ", ".join(parts)


async def _headless(args: argparse.Namespace, config: Config) -> int:
    sink, audio_note = make_sink(config, args.mute, args.out)
    failures: list[str] = []
    answers: list[str] = []

    def on_event(event: PipelineEvent) -> None:
        if isinstance(event, TurnFailed):
            failures.append(event.message)
        elif isinstance(event, TurnFinished):
            answers.append(event.answer)

    def progress(message: str) -> None:
        print(f"... {message}", file=sys.stderr, flush=True)

    try:
        session = await open_session(config, sink, progress, on_event)
    except STARTUP_ERRORS as exc:
        print(f"voicecli: error: {exc}", file=sys.stderr)
        return 2
    progress(audio_note)
    try:
        lines = [args.text] if args.text is not None else None
        while True:
            if lines is not None:
                if not lines:
                    break
                text = lines.pop(0)
            else:
                try:
                    text = await asyncio.to_thread(input, "you> ")
                except EOFError:
                    break
            if not text.strip():
                continue
            failures.clear()
            answers.clear()
            timeline = await session.pipeline.turn(text.strip())
            answer = answers[-1].strip() if answers else ""
            print(f"assistant> {answer}" if answer else "assistant> (no answer)", flush=True)
            print(summary(timeline), file=sys.stderr, flush=True)
            if failures:
                print(f"voicecli: error: {failures[0]}", file=sys.stderr)
                if args.text is not None:
                    return 2
    finally:
        await session.aclose()
    if args.out is not None and isinstance(sink, CollectingSink):
        save_wav(args.out, sink.audio())
        print(f"saved {sink.audio().size / SAMPLE_RATE:.2f} s of audio to {args.out}", file=sys.stderr)
    return 0


def run_chat(args: argparse.Namespace, config: Config) -> int:
    if args.no_tui or args.text is not None:
        return asyncio.run(_headless(args, config))
    from voicecli.tui.app import VoiceChatApp

    app = VoiceChatApp(config, mute=args.mute)
    app.run()
    return app.return_code or 0
