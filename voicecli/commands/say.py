"""`voicecli say "TEXT"`: one text, one request, through any transport, played or saved, with honest timings.

Why a command of its own: it is the smallest end-to-end check of a TTS path (endpoint, transport, decoder, speaker)
with no LLM and no microphone in the way, so when a chat sounds wrong it tells which half is at fault, and its
`--json` timings compare transports on equal terms: every mark is taken on ONE monotonic clock, relative to the
moment the request was on its way.

bidi mode uses the session's streaming transport (the WebSocket, or the SageMaker transport that
endpoint.sagemaker.transport selects); batch mode uses the batch transport (POST /invocations, or InvokeEndpoint).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from voicecli.audio.mp3_decode import Mp3DecodeError
from voicecli.audio.pcm import Samples
from voicecli.audio.streams import answer_decoder
from voicecli.audio.wav import save_wav
from voicecli.config import CONSTRAINTS, Config, ConfigError
from voicecli.playback.speaker import Speaker
from voicecli.tts.base import MAX_REQUEST_AUDIO_S, AudioFailed, SpeechRequest, TTSTransport
from voicecli.tts.consumer import AudioConsumer, RequestAudio, Stalled
from voicecli.wire.protocol import SAMPLE_RATE

STALL_TIMEOUT_S = 60.0
"""No event for this long means the endpoint is stuck; say so instead of hanging."""
DRAIN_TIMEOUT_S = 600.0
ANSWER_ID = "say"
MAX_KEPT_S = MAX_REQUEST_AUDIO_S
"""Most audio `say` keeps (for --out, and to report its length): its one request's limit. The transports hold each
request to that limit already; this holds the samples actually kept to it whatever the transport, so memory stays
bounded (600 s of float32 samples at 24 kHz is 58 MB)."""


class SayError(RuntimeError):
    """An expected failure: printed as one line on stderr, exit status 2."""


@dataclass(frozen=True)
class SayReport:
    """What `--json` prints. Times are milliseconds after the request was sent, on one monotonic clock.

    first_audio_played_ms is when the first audible sample reached the output device (null with --out);
    done_ms is when the last sample was played (with --out: when the last audio arrived). underruns counts the
    times the speaker ran dry mid-answer (audio arriving slower than real time, heard as gaps; null with --out).
    sent_monotonic_s is time.monotonic() at request sent: the same clock in every process on this machine, so the
    marks can be lined up with a server's or a proxy's own log.
    """

    request_sent: float
    first_audio_byte_ms: float | None
    first_audio_played_ms: float | None
    last_audio_byte_ms: float | None
    done_ms: float
    audio_seconds: float
    transport: str
    endpoint: str
    mode: str
    voice: str
    speed: float
    format: str
    out: str | None
    underruns: int | None
    sent_monotonic_s: float

    def summary(self) -> str:
        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:.0f} ms"

        return (f"[{self.transport}] first audio byte {ms(self.first_audio_byte_ms)}, first audio played "
                f"{ms(self.first_audio_played_ms)}, done {ms(self.done_ms)}, {self.audio_seconds:.2f} s of audio"
                + (f", saved to {self.out}" if self.out else ""))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", help="the text to speak")
    parser.add_argument("--mode", choices=("bidi", "batch"), default=None,
                        help="bidi: the streaming transport (default); batch: one whole-audio request")
    parser.add_argument("--voice", default=None, help="Kokoro voice, e.g. af_heart (default from config)")
    parser.add_argument("--speed", type=float, default=None, help="speaking speed 0.5..2.0 (default from config)")
    parser.add_argument("--format", choices=("mp3", "pcm16"), default=None,
                        help="audio format on the wire (default from config)")
    parser.add_argument("--out", type=Path, default=None, metavar="WAV",
                        help="save the audio to this WAV file (24 kHz mono 16-bit) instead of playing it")
    parser.add_argument("--json", action="store_true", help="print the timings as one JSON object on stdout")


def run(args: argparse.Namespace, config: Config) -> int:
    try:
        report = asyncio.run(_say(args, config))
    except SayError as exc:
        print(f"voicecli: error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(json.dumps(asdict(report)) if args.json else report.summary(), flush=True)
    return 0


def _progress(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace, config: Config) -> tuple[str, str, float, str]:
    """mode, voice, speed, format: the flag when given, else the configuration (cli maps --mode/--voice already)."""
    mode = args.mode or config.tts.mode
    voice = args.voice or config.tts.voice
    speed = config.tts.speed if args.speed is None else float(args.speed)
    problem = CONSTRAINTS["tts.speed"].check(speed)
    if problem is not None:
        raise SayError(f"--speed {speed:g}: expected {problem}")
    audio_format = args.format or config.tts.format
    return mode, voice, speed, audio_format


def _open_speaker(config: Config) -> Speaker:
    try:
        from voicecli.playback.speaker import open_speaker

        return open_speaker(config)
    except Exception as exc:  # no PortAudio, no device, device busy
        text = str(exc).strip()
        reason = text.splitlines()[0].split(". ")[0].rstrip(".:") if text else exc.__class__.__name__
        raise SayError(f"cannot play audio: {reason}; use --out reply.wav to save the audio instead (or start a "
                       "sound server, see `voicecli doctor`)") from exc


async def _say(args: argparse.Namespace, config: Config) -> SayReport:
    from voicecli.converse.session import open_transports
    from voicecli.tts.base import TransportError
    from voicecli.tts.local_endpoint import EndpointStartError

    text = args.text.strip()
    if not text:
        raise SayError("nothing to say: the text is empty")
    try:
        mode, voice, speed, audio_format = _settings(args, config)
    except ConfigError as exc:
        raise SayError(str(exc)) from exc
    speaker = None if args.out is not None else _open_speaker(config)
    try:
        async with contextlib.AsyncExitStack() as stack:  # the transports and a local endpoint, closed at the end
            try:
                opened = await open_transports(config, _progress, stack)
            except (TransportError, EndpointStartError, ConfigError, OSError) as exc:
                raise SayError(" ".join(str(exc).split())) from exc
            transport, label = opened.by_mode[mode], opened.label
            request = SpeechRequest(ANSWER_ID, text, voice, speed, "pcm16" if audio_format == "pcm16" else "mp3")
            samples, marks = await _speak(transport, request, speaker)
        if args.out is not None:
            try:
                save_wav(args.out, samples)
            except OSError as exc:
                raise SayError(f"cannot write {args.out}: {exc}") from exc
        sent = marks["sent"]

        def rel(name: str) -> float | None:
            at = marks.get(name)
            return None if at is None else round(1000.0 * (at - sent), 1)

        done = rel("played_to") if speaker is not None else rel("done")
        return SayReport(
            request_sent=0.0, first_audio_byte_ms=rel("first_byte"), first_audio_played_ms=rel("first_played"),
            last_audio_byte_ms=rel("done"), done_ms=done if done is not None else 0.0,
            audio_seconds=round(samples.size / SAMPLE_RATE, 3), transport=transport.name, endpoint=label, mode=mode,
            voice=voice, speed=speed, format=request.format, out=None if args.out is None else str(args.out),
            underruns=None if speaker is None else speaker.player.stats.underruns, sent_monotonic_s=sent,
        )
    finally:
        if speaker is not None:
            speaker.close()


class _SayAudio(AudioConsumer):
    """The one request's audio: decoded, kept, and played at once; a failure ends the command."""

    def __init__(self, transport: TTSTransport, request: SpeechRequest, speaker: Speaker | None) -> None:
        super().__init__(transport, STALL_TIMEOUT_S, _AudioDecoder, request.format)
        self.speaker = speaker
        self.pieces: list[Samples] = []
        self.kept = 0
        """Samples in `pieces`."""

    def audio(self, entry: RequestAudio, samples: Samples) -> None:
        self.kept += samples.size
        if self.kept > MAX_KEPT_S * SAMPLE_RATE:
            raise SayError(f"the endpoint sent more than {MAX_KEPT_S:.0f} s of audio for this text, the most `voicecli "
                           "say` keeps; if the text really speaks that long, split it or raise --speed, otherwise "
                           "check the endpoint with `voicecli doctor`")
        self.pieces.append(samples)
        if self.speaker is not None:
            self.speaker.write(samples, ANSWER_ID)

    def failed(self, entry: RequestAudio | None, event: AudioFailed) -> None:
        if entry is not None or event.request_id is None:  # another id: not this request's business
            raise SayError(f"the endpoint could not speak this text: {' '.join(event.message.split())} "
                           f"({event.code})")


async def _speak(transport: TTSTransport, request: SpeechRequest,
                 speaker: Speaker | None) -> tuple[Samples, dict[str, float]]:
    """Send one request, decode its audio as it arrives (playing it at once), and mark each stage."""
    from voicecli.tts.base import TransportError

    reader = _SayAudio(transport, request, speaker)
    entry = reader.track(request.request_id)
    reader.close()
    try:
        await transport.send(request)
    except TransportError as exc:
        raise SayError(" ".join(str(exc).split())) from exc
    marks: dict[str, float] = {"sent": time.monotonic()}
    try:
        await reader.run()
    except Stalled:
        raise SayError(f"the TTS endpoint sent nothing for {STALL_TIMEOUT_S:.0f} s; it may be overloaded or "
                       "stuck: check `voicecli doctor`, or restart it") from None
    for name, at in (("first_byte", entry.first_byte), ("done", entry.done)):
        if at is not None:
            marks[name] = at
    if speaker is not None:
        speaker.finish(ANSWER_ID)
        await asyncio.to_thread(speaker.player.wait_done, DRAIN_TIMEOUT_S)
        timing = speaker.player.timing(ANSWER_ID)
        played = speaker.first_played(ANSWER_ID)
        if played is not None:
            marks["first_played"] = played
        end = timing.last_sample_at_dac if timing is not None else None
        marks["played_to"] = end if end is not None else time.monotonic()
    audio = np.concatenate(reader.pieces) if reader.pieces else np.zeros(0, np.float32)
    return audio, marks


class _AudioDecoder:
    """The answer's decoder (voicecli.audio.streams), with undecodable MP3 worded for the user."""

    def __init__(self, audio_format: str) -> None:
        self._decoder = answer_decoder(audio_format)

    def feed(self, data: bytes) -> Samples:
        try:
            return self._decoder.feed(data)
        except Mp3DecodeError as exc:
            raise SayError(f"the endpoint sent undecodable MP3 ({exc})") from exc

    def flush(self) -> Samples:
        try:
            return self._decoder.flush()
        except Mp3DecodeError as exc:
            raise SayError(f"the endpoint sent undecodable MP3 ({exc})") from exc
