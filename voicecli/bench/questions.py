"""The spoken questions the benches play or transcribe: built-in sets voiced at run time, or a user's folder.

Built in (voicecli/bench/question_sets.py): `latency`, short questions spoken by espeak-ng (a system package, no
model to download), every second one with a silence of 400-600 ms inserted where the sentence is clearly unfinished
("What is the capital of" ... "Italy?"); `quality` and `holdout`, factual questions with accepted answers, voiced
the way people differ: several Kokoro voices (American and British, female and male) synthesized by the project's
own endpoint (POST /invocations, the same wire as the app), and espeak-ng's robotic en-us; speaking rates 0.9-1.2x;
every third question under pink noise at 20 dB SNR; a pause of 400-800 ms wherever the set marks one. Which voice,
rate and noise each question gets is fixed by its position (`voicing_for`), so every run of a set is the same audio
up to the synthesizer's own determinism. Why those: a user thinking mid-sentence is exactly where an end-of-turn
detector answers too early, and voices other than the app's own are where speech recognition mishears.

Each pause is exact: the segments are trimmed to their first and last audible samples (voicecli.bench.audio_marks)
and joined with numpy zeros, so the gap between the last sound before it and the first sound after it is the stated
number of ms; noise is added after, over the whole file, lead-in and pauses included (as a room would).

`--questions DIR`: any WAV files (one question each, sorted by name), read with soundfile at their own rate and
mixed to mono. Every question is rewritten as a 16-bit mono WAV in the run's work folder, so what paplay plays is
exactly what was analysed. A `questions.json` beside them says what each one asks and which answers are right, so
the bench can score what was understood and answered (voicecli.bench.scoring):
    {"questions": [{"file": "q00.wav", "text": "What is the capital of France?", "answers": ["paris"]}]}
(`answers`: any one counts; optional, as is any file's entry: a WAV without one is timed, not scored).
`voicecli bench questions --set quality --out DIR` writes a built-in set in exactly that form.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.levels import rms_dbfs
from voicecli.bench.audio_marks import pauses_ms, sound_span, trim
from voicecli.bench.question_sets import SETS, TUNED_ON, QuestionSpec
from voicecli.bench.target import BenchError
from voicecli.bench.virtual_audio import write_wav_int16
from voicecli.config import Config
from voicecli.errors import UserError

MANIFEST = "questions.json"
PAUSES_MS: tuple[float, ...] = (600.0, 450.0, 550.0, 400.0)
"""The latency set's pauses, in turn (the figures the README's turn latencies were measured with)."""
QUALITY_PAUSES_MS: tuple[float, ...] = (500.0, 800.0, 400.0, 700.0, 600.0)
"""The quality and holdout sets' pauses: 400-800 ms, the hesitations a person makes mid-question."""
ESPEAK = "espeak"
ESPEAK_VOICE = "en-us"
ESPEAK_WORDS_PER_MINUTE = 140
"""A calm speaking rate that tiny.en transcribes reliably from espeak's voice (speed 1.0)."""
VOICES: tuple[str, ...] = ("af_bella", "am_michael", ESPEAK, "bf_emma", "am_adam", "af_nicole", ESPEAK, "bm_george")
"""Who speaks the quality and holdout questions, in turn: six Kokoro voices other than the app's own af_heart, and
espeak-ng (a quarter of the questions)."""
SPEEDS: tuple[float, ...] = (1.0, 1.15, 0.9, 1.2, 1.05, 0.95)
NOISE_EVERY = 3
"""Every third question (the third, sixth, ...) is heard under noise."""
NOISE_SNR_DB = 20.0
LEAD_IN_S = 0.3
"""Silence before and after each question, so the microphone hears its onset and end cleanly."""
KOKORO_TIMEOUT_S = 120.0
SEGMENT = "segment.wav"
"""espeak-ng's scratch file in the work folder."""


@dataclass(frozen=True)
class Voicing:
    """How one built-in question is spoken."""

    voice: str
    """A Kokoro voice, or ESPEAK."""
    speed: float
    noise_snr_db: float | None = None

    def describe(self) -> dict[str, Any]:
        engine = "espeak-ng" if self.voice == ESPEAK else "kokoro"
        return {"engine": engine, "voice": ESPEAK_VOICE if self.voice == ESPEAK else self.voice,
                "speed": self.speed, "noise_snr_db": self.noise_snr_db}


def voicing_for(set_name: str, index: int) -> Voicing:
    """The voicing of question `index` of a built-in set: espeak at the calm rate for `latency` (as always); for
    the others, voice, rate and noise by position, on cycles of different lengths so they combine differently."""
    if set_name == "latency":
        return Voicing(ESPEAK, 1.0)
    noise = NOISE_SNR_DB if index % NOISE_EVERY == NOISE_EVERY - 1 else None
    return Voicing(VOICES[index % len(VOICES)], SPEEDS[index % len(SPEEDS)], noise)


@dataclass(frozen=True)
class Question:
    """One question ready to play: a 16-bit mono WAV and what is known about its sound from the file itself."""

    name: str
    text: str
    """What is said ("" when unknown, for a user's WAV file)."""
    path: Path
    rate: int
    duration_s: float
    voiced_start_s: float
    voiced_end_s: float
    """Time of the last voiced sample from the start of the file: the question's end of speech."""
    pauses_ms: tuple[float, ...]
    """Silent gaps inside the question (>= 100 ms), e.g. a mid-sentence pause."""
    answers: tuple[str, ...] = ()
    """Accepted answers, any one counts (empty: the answer is not scored)."""
    voicing: dict[str, Any] = field(default_factory=dict)
    """How a built-in question was spoken (Voicing.describe()); empty for a user's file."""

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "text": self.text, "duration_s": round(self.duration_s, 3),
                "voiced_start_s": round(self.voiced_start_s, 3), "voiced_end_s": round(self.voiced_end_s, 3),
                "pauses_ms": [round(p) for p in self.pauses_ms], "answers": list(self.answers),
                "voicing": self.voicing}


def _question(name: str, text: str, samples: NDArray[np.float32], rate: int, path: Path,
              answers: tuple[str, ...] = (), voicing: dict[str, Any] | None = None) -> Question:
    """Write the question as a 16-bit WAV, then take its marks from that file: what is played is what is known."""
    import soundfile

    write_wav_int16(path, samples, rate)
    samples = np.asarray(soundfile.read(str(path), dtype="float32")[0], dtype=np.float32)
    span = sound_span(samples, rate)
    if span is None:
        raise BenchError(f"question {name} is silent (nothing above -40 dBFS): record it louder")
    return Question(name, text, path, rate, len(samples) / rate, span[0] / rate, span[1] / rate,
                    tuple(pauses_ms(samples, rate)), answers, dict(voicing or {}))


def espeak_speech(text: str, work: Path, speed: float = 1.0) -> tuple[NDArray[np.float32], int]:
    import soundfile

    out = work / SEGMENT
    words_per_minute = round(ESPEAK_WORDS_PER_MINUTE * speed)
    try:
        subprocess.run(["espeak-ng", "-v", ESPEAK_VOICE, "-s", str(words_per_minute), "-w", str(out), text],
                       check=True, capture_output=True, timeout=60)
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"espeak-ng failed on {text!r}: {exc.stderr.decode(errors='replace').strip()}") from exc
    data, rate = soundfile.read(str(out), dtype="float32")
    return np.asarray(data, dtype=np.float32), int(rate)


def kokoro_speech(text: str, voice: str, speed: float, endpoint_url: str,
                  token: str) -> tuple[NDArray[np.float32], int]:
    """`text` spoken by the endpoint, as 16-bit PCM (one POST /invocations, the protocol's own request body)."""
    import httpx

    from voicecli.tts.base import SpeechRequest
    from voicecli.tts.serial import invocation_body
    from voicecli.wire.protocol import INVOCATIONS_PATH, SAMPLE_RATE

    body = invocation_body(SpeechRequest("question", text, voice, speed, "pcm16"), stream=False)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        response = httpx.post(endpoint_url.rstrip("/") + INVOCATIONS_PATH, content=body, headers=headers,
                              timeout=KOKORO_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise BenchError(f"the endpoint at {endpoint_url} did not voice {text!r}: {exc}") from exc
    if response.status_code != 200:
        raise BenchError(f"the endpoint at {endpoint_url} refused to voice {text!r} with {voice}: "
                         f"{response.status_code} {response.text[:200]}")
    pcm = np.frombuffer(response.content[: len(response.content) // 2 * 2], dtype="<i2")
    return (pcm.astype(np.float32) / 32768.0), SAMPLE_RATE


def _pink_noise(count: int, seed: int) -> NDArray[np.float32]:
    """Pink (1/f) noise of unit RMS: a room's hum and hiss are louder low than high, unlike white noise."""
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(count))
    frequencies = np.arange(len(spectrum), dtype=np.float64)
    frequencies[0] = 1.0
    noise = np.fft.irfft(spectrum / np.sqrt(frequencies), n=count)
    return (noise / max(float(np.sqrt(np.mean(noise**2))), 1e-12)).astype(np.float32)


def add_noise(samples: NDArray[np.float32], rate: int, snr_db: float, seed: int) -> NDArray[np.float32]:
    """`samples` plus pink noise `snr_db` below the speech's level (the RMS of its voiced span, pauses included)."""
    span = sound_span(samples, rate)
    voiced = samples[span[0]: span[1] + 1] if span is not None else samples
    speech_rms = 10 ** (rms_dbfs(voiced) / 20)
    noise = _pink_noise(len(samples), seed) * speech_rms * 10 ** (-snr_db / 20)
    return np.clip(samples + noise, -1.0, 1.0).astype(np.float32)


def _spoken(spec: QuestionSpec, voicing: Voicing, pauses: tuple[float, ...], pause_index: int, work: Path,
            endpoint_url: str | None, token: str) -> tuple[NDArray[np.float32], int, int]:
    """The question's segments spoken and joined by exact pauses; returns (samples, rate, next pause index)."""
    parts: list[NDArray[np.float32]] = []
    rate = 0
    for position, text in enumerate(spec.segments):
        if voicing.voice == ESPEAK:
            audio, rate = espeak_speech(text, work, voicing.speed)
        else:
            if endpoint_url is None:
                raise BenchError("voicing with Kokoro needs the endpoint's URL")
            audio, rate = kokoro_speech(text, voicing.voice, voicing.speed, endpoint_url, token)
        if position > 0:
            parts.append(np.zeros(round(rate * pauses[pause_index % len(pauses)] / 1000), dtype=np.float32))
            pause_index += 1
        parts.append(trim(audio, rate))
    edge = np.zeros(round(rate * LEAD_IN_S), dtype=np.float32)
    return np.concatenate([edge, *parts, edge]), rate, pause_index


def needs_endpoint(set_name: str) -> bool:
    """Whether voicing `set_name` takes Kokoro voices from an endpoint."""
    return any(voicing_for(set_name, i).voice != ESPEAK for i in range(len(SETS[set_name])))


def voice_set(set_name: str, work: Path, endpoint_url: str | None = None, token: str = "",
              progress: Callable[[str], None] | None = None, limit: int | None = None) -> list[Question]:
    """A built-in set voiced into `work` (Kokoro voices from the endpoint at `endpoint_url`, espeak-ng here); only
    its first `limit` questions when a run needs no more (each keeps the voicing of its position)."""
    if shutil.which("espeak-ng") is None:
        raise BenchError("espeak-ng is not installed (apt-get install espeak-ng), or pass --questions DIR with "
                         "WAV files of your own")
    specs = SETS[set_name][:limit]
    pauses = PAUSES_MS if set_name == "latency" else QUALITY_PAUSES_MS
    work.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    pause_index = 0
    for index, spec in enumerate(specs):
        if progress is not None:
            progress(f"voicing question {index + 1}/{len(specs)} of the {set_name} set")
        voicing = voicing_for(set_name, index)
        samples, rate, pause_index = _spoken(spec, voicing, pauses, pause_index, work, endpoint_url, token)
        if voicing.noise_snr_db is not None:
            samples = add_noise(samples, rate, voicing.noise_snr_db, seed=index)
        name = f"q{index + 1:02d}"
        questions.append(_question(name, spec.text, samples, rate, work / f"{name}.wav", spec.answers,
                                   voicing.describe()))
    (work / SEGMENT).unlink(missing_ok=True)  # not a question: a folder of questions must hold only those
    return questions


def built_in(work: Path) -> list[Question]:
    """The latency set, spoken by espeak-ng into `work`."""
    return voice_set("latency", work)


async def voiced_questions(args: argparse.Namespace, work: Path, config: Config, progress: Callable[[str], None],
                           endpoint_url: str | None = None, limit: int | None = None) -> tuple[list[Question], str]:
    """The questions a bench was asked for (`--questions DIR`, else `--set`, else the bench's default set) as WAVs
    in `work`, and a line saying where they came from. Kokoro voices come from `endpoint_url`, or, when None, from
    the configured endpoint (started for the occasion if it is the local one, and stopped after). `limit`: voice
    only that many of a built-in set (a run that asks fewer questions than the set holds)."""
    import asyncio

    from voicecli.bench.target import resolve_target

    if args.questions is not None:
        return from_directory(Path(args.questions), work), str(args.questions)
    set_name = args.question_set or args.default_set
    kind = "tuned on" if set_name in TUNED_ON else "never tuned on"
    source = f"built-in set {set_name!r} ({len(SETS[set_name])} questions, {kind})"
    if endpoint_url is not None or not needs_endpoint(set_name):
        questions = await asyncio.to_thread(voice_set, set_name, work, endpoint_url, config.endpoint.token, progress,
                                            limit)
        return questions, source
    target = await resolve_target(config, progress)
    try:
        questions = await asyncio.to_thread(voice_set, set_name, work, target.url, target.token, progress, limit)
    finally:
        target.close()
    return questions, source


def from_directory(directory: Path, work: Path) -> list[Question]:
    """Every *.wav in `directory` (sorted by name) as a question; a clear error for an unreadable or silent one."""
    import soundfile

    if not directory.is_dir():
        raise BenchError(f"--questions {directory}: not a directory (give a folder of WAV files, one question each)")
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav" and p.is_file())
    if not files:
        raise BenchError(f"--questions {directory}: no .wav files in it")
    known = read_manifest(directory, {path.name for path in files})
    work.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    for index, path in enumerate(files):
        try:
            data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        except (RuntimeError, OSError) as exc:
            raise BenchError(f"--questions: cannot read {path} as audio ({exc})") from exc
        mono = np.ascontiguousarray(data.mean(axis=1), dtype=np.float32)
        text, answers = known.get(path.name, ("", ()))
        questions.append(_question(path.name, text, mono, int(rate), work / f"q{index + 1:02d}.wav", answers))
    return questions


def read_manifest(directory: Path, files: set[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """`directory`/questions.json as {file: (text, accepted answers)}; {} without one. A clear error for a manifest
    that is not the documented shape or names a WAV file that is not there."""
    path = directory / MANIFEST
    if not path.is_file():
        return {}
    shape = ('{"questions": [{"file": "q00.wav", "text": "What is the capital of France?", "answers": ["paris"]}]}')
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["questions"]
        known = {}
        for entry in entries:
            answers = entry.get("answers", [])
            if not isinstance(entry["file"], str) or not isinstance(entry["text"], str) or not isinstance(
                    answers, list) or not all(isinstance(a, str) for a in answers):
                raise TypeError(entry)
            known[entry["file"]] = (entry["text"], tuple(answers))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BenchError(f"--questions: {path} is not a questions manifest ({type(exc).__name__}: {exc}); "
                         f"expected {shape}") from exc
    missing = sorted(set(known) - files)
    if missing:
        raise BenchError(f"--questions: {path} names {', '.join(missing)}, not among the .wav files of {directory}")
    return known


def write_manifest(questions: list[Question], directory: Path) -> Path:
    """`directory`/questions.json for questions whose WAVs are in `directory` (what --questions reads back), with
    each built-in question's voicing alongside (extra keys the reader ignores)."""
    entries = [{"file": q.path.name, "text": q.text, "answers": list(q.answers), "voicing": q.voicing}
               for q in questions]
    path = directory / MANIFEST
    path.write_text(json.dumps({"questions": entries}, indent=2) + "\n", encoding="utf-8")
    return path


def run(args: argparse.Namespace, config: Config) -> int:
    """`voicecli bench questions --set NAME --out DIR`: voice a built-in set into DIR (WAVs + questions.json)."""
    import asyncio

    from voicecli.tts.local_endpoint import EndpointStartError

    out = Path(args.out)
    args.questions, args.default_set = None, args.question_set
    try:
        questions, source = asyncio.run(voiced_questions(args, out, config, lambda line: print(line, flush=True)))
    except (BenchError, EndpointStartError) as exc:
        raise UserError(str(exc)) from None
    path = write_manifest(questions, out)
    print(f"{len(questions)} questions of the {source} in {out} ({path.name} says what each asks)")
    return 0
