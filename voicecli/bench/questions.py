"""The spoken questions `voicecli bench turns` plays into the virtual microphone.

Built in: short questions spoken by espeak-ng at run time (a system package, no model to download), every second
one with a silence of 400-600 ms inserted at a point where the sentence is clearly unfinished ("What is the capital
of" ... "France?"). Why those: a user thinking mid-sentence is exactly where an end-of-turn detector answers too
early, and the bench must catch that (a premature answer), not only time the easy case. Each pause is exact: the
segments are trimmed to their first and last audible samples (voicecli.bench.audio_marks) and joined with numpy
zeros, so the gap between the last sound before it and the first sound after it is the stated number of ms.

`--questions DIR`: any WAV files (one question each, sorted by name), read with soundfile at their own rate and
mixed to mono. Every question is rewritten as a 16-bit mono WAV in the run's work folder, so what paplay plays is
exactly what was analysed.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voicecli.bench.audio_marks import pauses_ms, sound_span, trim
from voicecli.bench.target import BenchError
from voicecli.bench.virtual_audio import write_wav_int16

BUILT_IN: tuple[tuple[str, ...], ...] = (
    ("What is the capital of France?",),
    ("What is the capital of", "Italy?"),
    ("Name a large animal.",),
    ("How many legs does", "a spider have?"),
    ("What color is the sky?",),
    ("What do you call", "a baby cat?"),
    ("How many days are in a week?",),
    ("Tell me the name of", "a big river."),
)
"""Segments of each question; between two segments goes a pause from PAUSES_MS (in turn)."""
PAUSES_MS: tuple[float, ...] = (600.0, 450.0, 550.0, 400.0)
ESPEAK_VOICE = "en-us"
ESPEAK_WORDS_PER_MINUTE = 140
"""A calm speaking rate that tiny.en transcribes reliably from espeak's voice."""
LEAD_IN_S = 0.3
"""Silence before and after each question, so the microphone hears its onset and end cleanly."""


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

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "text": self.text, "duration_s": round(self.duration_s, 3),
                "voiced_start_s": round(self.voiced_start_s, 3), "voiced_end_s": round(self.voiced_end_s, 3),
                "pauses_ms": [round(p) for p in self.pauses_ms]}


def _question(name: str, text: str, samples: NDArray[np.float32], rate: int, path: Path) -> Question:
    """Write the question as a 16-bit WAV, then take its marks from that file: what is played is what is known."""
    import soundfile

    write_wav_int16(path, samples, rate)
    samples = np.asarray(soundfile.read(str(path), dtype="float32")[0], dtype=np.float32)
    span = sound_span(samples, rate)
    if span is None:
        raise BenchError(f"question {name} is silent (nothing above -40 dBFS): record it louder")
    return Question(name, text, path, rate, len(samples) / rate, span[0] / rate, span[1] / rate,
                    tuple(pauses_ms(samples, rate)))


def _espeak(text: str, work: Path) -> tuple[NDArray[np.float32], int]:
    import soundfile

    out = work / "segment.wav"
    try:
        subprocess.run(["espeak-ng", "-v", ESPEAK_VOICE, "-s", str(ESPEAK_WORDS_PER_MINUTE), "-w", str(out), text],
                       check=True, capture_output=True, timeout=60)
    except subprocess.CalledProcessError as exc:
        raise BenchError(f"espeak-ng failed on {text!r}: {exc.stderr.decode(errors='replace').strip()}") from exc
    data, rate = soundfile.read(str(out), dtype="float32")
    return np.asarray(data, dtype=np.float32), int(rate)


def built_in(work: Path) -> list[Question]:
    """The built-in questions, spoken by espeak-ng into `work`."""
    if shutil.which("espeak-ng") is None:
        raise BenchError("espeak-ng is not installed (apt-get install espeak-ng), or pass --questions DIR with "
                         "WAV files of your own")
    work.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    pause_index = 0
    for index, segments in enumerate(BUILT_IN):
        parts: list[NDArray[np.float32]] = []
        rate = 0
        for position, text in enumerate(segments):
            audio, rate = _espeak(text, work)
            if position > 0:
                pause = PAUSES_MS[pause_index % len(PAUSES_MS)]
                pause_index += 1
                parts.append(np.zeros(round(rate * pause / 1000), dtype=np.float32))
            parts.append(trim(audio, rate))
        edge = np.zeros(round(rate * LEAD_IN_S), dtype=np.float32)
        samples = np.concatenate([edge, *parts, edge])
        questions.append(_question(f"q{index + 1:02d}", " ".join(segments), samples, rate,
                                   work / f"q{index + 1:02d}.wav"))
    return questions


def from_directory(directory: Path, work: Path) -> list[Question]:
    """Every *.wav in `directory` (sorted by name) as a question; a clear error for an unreadable or silent one."""
    import soundfile

    if not directory.is_dir():
        raise BenchError(f"--questions {directory}: not a directory (give a folder of WAV files, one question each)")
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() == ".wav" and p.is_file())
    if not files:
        raise BenchError(f"--questions {directory}: no .wav files in it")
    work.mkdir(parents=True, exist_ok=True)
    questions: list[Question] = []
    for index, path in enumerate(files):
        try:
            data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        except (RuntimeError, OSError) as exc:
            raise BenchError(f"--questions: cannot read {path} as audio ({exc})") from exc
        mono = np.ascontiguousarray(data.mean(axis=1), dtype=np.float32)
        questions.append(_question(path.name, "", mono, int(rate), work / f"q{index + 1:02d}.wav"))
    return questions
