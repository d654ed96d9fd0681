"""The spoken questions `voicecli bench turns` plays into the virtual microphone.

Built in: short questions spoken by espeak-ng at run time (a system package, no model to download), every second
one with a silence of 400-600 ms inserted at a point where the sentence is clearly unfinished ("What is the capital
of" ... "France?"). Why those: a user thinking mid-sentence is exactly where an end-of-turn detector answers too
early, and the bench must catch that (a premature answer), not only time the easy case. Each pause is exact: the
segments are trimmed to their first and last audible samples (voicecli.bench.audio_marks) and joined with numpy
zeros, so the gap between the last sound before it and the first sound after it is the stated number of ms.

`--questions DIR`: any WAV files (one question each, sorted by name), read with soundfile at their own rate and
mixed to mono. Every question is rewritten as a 16-bit mono WAV in the run's work folder, so what paplay plays is
exactly what was analysed. A `questions.json` beside them says what each one asks and which answers are right, so
the bench can score what was understood and answered (voicecli.bench.scoring):
    {"questions": [{"file": "q00.wav", "text": "What is the capital of France?", "answers": ["paris"]}]}
(`answers`: any one counts; optional, as is any file's entry: a WAV without one is timed, not scored).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from voicecli.bench.audio_marks import pauses_ms, sound_span, trim
from voicecli.bench.target import BenchError
from voicecli.bench.virtual_audio import write_wav_int16

BUILT_IN: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("What is the capital of France?",), ("paris",)),
    (("What is the capital of", "Italy?"), ("rome",)),
    (("Name a large animal.",), ()),
    (("How many legs does", "a spider have?"), ("8",)),
    (("What color is the sky?",), ("blue",)),
    (("What do you call", "a baby cat?"), ("kitten",)),
    (("How many days are in a week?",), ("7",)),
    (("Tell me the name of", "a big river."), ()),
)
"""Segments of each question (between two goes a pause from PAUSES_MS, in turn), and its accepted answers (none:
an open question, timed but not scored)."""
MANIFEST = "questions.json"
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
    answers: tuple[str, ...] = ()
    """Accepted answers, any one counts (empty: the answer is not scored)."""

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "text": self.text, "duration_s": round(self.duration_s, 3),
                "voiced_start_s": round(self.voiced_start_s, 3), "voiced_end_s": round(self.voiced_end_s, 3),
                "pauses_ms": [round(p) for p in self.pauses_ms], "answers": list(self.answers)}


def _question(name: str, text: str, samples: NDArray[np.float32], rate: int, path: Path,
              answers: tuple[str, ...] = ()) -> Question:
    """Write the question as a 16-bit WAV, then take its marks from that file: what is played is what is known."""
    import soundfile

    write_wav_int16(path, samples, rate)
    samples = np.asarray(soundfile.read(str(path), dtype="float32")[0], dtype=np.float32)
    span = sound_span(samples, rate)
    if span is None:
        raise BenchError(f"question {name} is silent (nothing above -40 dBFS): record it louder")
    return Question(name, text, path, rate, len(samples) / rate, span[0] / rate, span[1] / rate,
                    tuple(pauses_ms(samples, rate)), answers)


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
    for index, (segments, answers) in enumerate(BUILT_IN):
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
                                   work / f"q{index + 1:02d}.wav", answers))
    return questions


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
