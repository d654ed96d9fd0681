"""`voicecli bench duplex`: the assistant hears its own answer through a room; does it interrupt itself, does it
hear the user who does, and does its history keep only what was said.

The app is the real one (`voicecli chat --no-tui`, as `voicecli bench turns` runs it) on the private PulseAudio,
with an echo path between its speaker and its microphone (voicecli.bench.echo_path: the speaker's sound, through a
seeded synthetic room, delayed 40-120 ms and as loud as, or 6 dB louder than, the user's voice). Per mode (`aec`:
echo cancellation, `gate`: the level gate, `off`: neither) and echo delay the app runs a session of its own (a room
keeps its delay from one answer to the next); per echo level in it, the turns alternate:
- echo only: a question is spoken into the microphone, the answer plays (and echoes), the user stays silent. Every
  barge-in the app reports is a false one (the echo alone); a spoken turn the app starts meanwhile is its own
  echo taken for the user's words (`echo_turns`).
- interrupted: the same, but 1.0-2.5 s into the answer (seeded) the user says "Wait, stop." over it. Measured: was
  the barge-in detected, and how long after the user's speech started (found in the microphone recording by
  matched filter with the utterance itself, so the echo mixed in does not move it; the barge-in's time is the
  app's own, on the same CLOCK_MONOTONIC); and does the interrupted turn's history (`spoken` of its turn_finished
  line) equal the words actually played, within one word. The words played are established independently: the
  speaker's recording from the answer's first sound to where playback stopped, transcribed with the project's
  Whisper, then matched to the longest prefix of the answer it fits.
Barge-ins before the user's speech starts, or more than DETECT_WINDOW_S after it ended, are false too.

ERLE (echo return loss enhancement): the microphone's level over the echo canceller's output on the echo-only
stretches, computed by running the project's canceller (voicecli.audio.echo_cancel) over the recorded microphone
with the recorded speaker as its reference; null where the project has no canceller. With --keep-audio also over
what the app's canceller handed on live (`erle_live_db`, from its echo dump): the two differ by what the canceller
was fed live (its far end's timeline, the app's block times), which the recordings do not tell (~6 dB on
duplex-20261206-keepbase).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from voicecli.bench.audio_marks import AUDIBLE_DBFS, QuietWatch, audible_share, sound_span
from voicecli.bench.echo_path import ECHO_RATE, EchoRouter, find_echo, find_pieces, median_estimate
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.progress import BenchProgress
from voicecli.bench.questions import Question, espeak_speech, kokoro_speech
from voicecli.bench.report import BenchResult, Sample, default_name, machine_line, run_bench
from voicecli.bench.scoring import word_errors, words
from voicecli.bench.target import BenchError, Target, endpoint_stats, resolve_target
from voicecli.bench.turns import App, app_command
from voicecli.bench.virtual_audio import (
    MIC_SOURCE,
    SPEAKER_MONITOR,
    PrivatePulse,
    PulseUnavailable,
    Recorder,
    write_wav_int16,
)
from voicecli.config import Config
from voicecli.converse.session import llm_label
from voicecli.converse.timeline import summarize
from voicecli.converse.turn_lines import TurnLine, read_line
from voicecli.errors import UserError

MODES: tuple[str, ...] = ("aec", "gate", "off")
QUESTIONS: tuple[str, ...] = (
    "Tell me about the ocean.",
    "Describe the sky on a clear day.",
    "Tell me about the moon.",
    "Describe the city of Paris.",
    "Tell me about honey bees.",
)
"""Questions that draw answers of several sentences, so that there is an answer to speak over."""
INTERRUPTION = "Wait, stop."
APP_ENV = {
    "VOICECLI_LLM__LOCAL__HISTORY_TURNS": "0",
    "VOICECLI_LLM__SYSTEM_PROMPT": "You are a voice assistant. Answer in four or five full sentences.",
}
"""Each question answered on its own and at length, so that every answer is long enough to speak over: the shipped
prompt asks for one short sentence (~1-2 s of speech), and the 135M local model copies earlier answers, so an
interrupted one ("The moon...") copied made every later answer too short to speak over (duplex-20261202, first
run). What is measured here is the echo and the barge-in, not the answers."""
APP_DEFAULTS = {"VOICECLI_LLM__MAX_TOKENS": "120"}
"""Settings the caller's environment may override (the CI test shortens answers further). At most 120 tokens
(~25-40 s of speech here): with the shipped 256 the 135M model's repetitive answers ran past RUNAWAY_S, were muted
there and left 6 of 8 echo-only answers without an ERLE (duplex-20261203-quietpath)."""
INTERRUPT_AFTER_S = (0.8, 2.0)
"""When the user speaks over the answer, after its first sound (seeded per turn)."""
DETECT_WINDOW_S = 1.5
"""A barge-in up to this long after the user's interruption ended is its detection; later ones are false."""
RECORD_RATE = ECHO_RATE
CLEAR_PIECE = 0.3
"""A 1 s piece of an answer whose echo correlates at least this well has a delay worth counting in its range."""
DOUBLE_TALK = 0.5
"""An interruption with the answer's echo sounding for at least this share of it counts as double talk."""
STARTUP_TIMEOUT_S = 300.0
TURN_TIMEOUT_S = 300.0
QUIET_S = 2.0
"""Speaker silence that says an answer has played out: longer than the gaps a slow synthesis leaves between sentences
on 2 busy cores (at 1.0 s the bench asked its next question into a still-running answer: duplex-20261202-history0)."""
SETTLE_S = 1.0
GAP_S = 0.8
MISS_S = 30.0
INTERRUPTION_TURN_S = 8.0
"""After the user's interruption the app still ends that turn (its hang-over), transcribes it and answers it: an
interrupted turn waits this long after the app's last line for the interruption's own transcript. Without it the
next question was asked into the answer to "Wait, stop." (which began ~0.5 s into that question, and the question's
legitimate barge-in counted as a false one: all four +6 dB turns of the 40 ms session of duplex-20261203-follow)."""
RUNAWAY_S = 60.0
"""An answer that keeps answering its own echo this long after the question is cut short (the echo is muted until
the speaker is quiet): the bench has counted it, and the next turn must start clean."""
STOPPED_QUIET_S = 0.3
"""The speaker quiet this long after a barge-in: playback was stopped."""
STOP_MARGIN_S = 0.15
"""After the app's barge-in, by when its speaker is surely silent (the device's latency, the recorders' timing)."""
LEAD_IN_S = 0.3
MUTED_DB = -math.inf

Kind = Literal["echo_only", "interrupted"]


def active_dbfs(samples: NDArray[np.float32], rate: int, window_ms: float = 10.0) -> float | None:
    """The level of the sound in `samples`, ignoring silences: the mean power of the 10 ms windows above
    AUDIBLE_DBFS, in dBFS (the speech level, the way a person compares two voices); None when nothing is audible."""
    size = max(1, round(rate * window_ms / 1000))
    count = len(samples) // size
    if count == 0:
        return None
    power = np.mean(np.square(samples[:count * size].astype(np.float64).reshape(count, size)), axis=1)
    loud = power[power > 10 ** (AUDIBLE_DBFS / 10)]
    return None if loud.size == 0 else 10 * math.log10(float(np.mean(loud)))


def parse_numbers(spec: str, flag: str, low: float, high: float) -> list[float]:
    """`--echo-gains 0,6` -> [0.0, 6.0], in the order given, each once; a one-line error otherwise."""
    values: list[float] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"{flag} takes a comma list of numbers, not {part!r}") from None
        if not low <= value <= high:
            raise UserError(f"{flag} {value:g} is outside {low:g}..{high:g}")
        if value not in values:
            values.append(value)
    if not values:
        raise UserError(f"{flag} needs at least one number")
    return values


def mode_env(mode: str, config: Config) -> dict[str, str] | None:
    """The environment that puts the app in `mode` (VOICECLI_AUDIO__* overrides), or None when this build has no
    such mode (`aec` before audio.echo exists). With audio.echo it names the mode; without it, gate and off are the
    echo gate on and off."""
    if "audio.echo" in config.sources:
        return {"VOICECLI_AUDIO__ECHO": mode}
    if mode == "aec":
        return None
    return {"VOICECLI_AUDIO__ECHO_GATE": "true" if mode == "gate" else "false"}


def kind_of(turn: int) -> Kind:
    """Echo only and interrupted turns alternate, echo only first."""
    return "echo_only" if turn % 2 == 0 else "interrupted"


def interrupt_after_s(seed: int, turn: int) -> float:
    rng = np.random.default_rng([seed, turn])
    return float(rng.uniform(*INTERRUPT_AFTER_S))


def stop_window(quiet: NDArray[np.bool_], need: int, dropped: int | None) -> int | None:
    """Where playback stopped, in 10 ms windows from the user's first word (`quiet`: the speaker's windows from
    there): the start of the silence the speaker is in at window `dropped` (the app's barge-in, plus the device's
    latency), or when that is unknown (no barge-in) or sounding, the first `need` quiet windows (from `dropped`).
    Why not simply the first silence after the user began: an answer that ran dry (synthesis slower than real time)
    has gaps, and one that played on after a gap the user began in was cut there, its last words left out of the
    words played (duplex-20261205-settle: "The ocean is a vast." for "...a vast and myster-" heard)."""
    if dropped is not None and 0 <= dropped < len(quiet) and quiet[dropped]:
        sounding = np.flatnonzero(~quiet[:dropped])
        return 0 if sounding.size == 0 else int(sounding[-1]) + 1
    runs = np.convolve(quiet.astype(np.int32), np.ones(need, dtype=np.int32), mode="valid")
    stops = np.flatnonzero(runs == need)
    if dropped is not None and dropped > 0:
        stops = stops[stops >= min(dropped, len(quiet))]
    return None if stops.size == 0 else int(stops[0])


def played_prefix(answer: str, played: str) -> int:
    """How many of the answer's words the played transcript covers: the prefix length it matches best (fewest word
    errors; of equal ones, the one closest to the transcript's own length)."""
    answer_words = words(answer)
    heard = words(played)
    best = (math.inf, math.inf, 0)
    for k in range(len(answer_words) + 1):
        errors = word_errors(" ".join(answer_words[:k]), " ".join(heard)) if k else len(heard)
        candidate = (errors, abs(k - len(heard)), k)
        best = min(best, candidate)
    return int(best[2])


@dataclass(frozen=True)
class HistoryCheck:
    """The interrupted turn's history against the words played: `matches` when the history is the answer's first
    `history_words` words and that count is within one of `played_words`."""

    history_words: int
    played_words: int
    prefix_of_answer: bool
    matches: bool


def check_history(answer: str, spoken: str, played: str) -> HistoryCheck:
    answer_words, kept = words(answer), words(spoken)
    played_words = played_prefix(answer, played)
    prefix = kept == answer_words[:len(kept)]
    return HistoryCheck(len(kept), played_words, prefix, prefix and abs(len(kept) - played_words) <= 1)


@dataclass(frozen=True)
class BargeIns:
    """The barge-ins of one turn sorted out: the one that detected the user (None: missed) and the false ones."""

    detected_at: float | None
    false: tuple[float, ...]


def sort_barge_ins(times: Sequence[float], speech_start: float | None, speech_end: float | None) -> BargeIns:
    """With no user speech every barge-in is false; otherwise the first one from the user's speech start to
    DETECT_WINDOW_S after its end detected it, and all others are false."""
    if speech_start is None or speech_end is None:
        return BargeIns(None, tuple(times))
    detected = next((t for t in sorted(times) if speech_start <= t <= speech_end + DETECT_WINDOW_S), None)
    return BargeIns(detected, tuple(t for t in times if t != detected))


@dataclass
class DuplexTurn:
    """One question of one mode at one echo level, what the app said about it and what the recordings showed."""

    mode: str
    echo_db: float
    delay_ms: float
    turn: int
    kind: Kind
    question: Question
    played_at: float
    interrupt_after_s: float | None = None
    interruption_played_at: float | None = None
    transcripts: list[str] = field(default_factory=list)
    finished: list[TurnLine] = field(default_factory=list)
    barge_ins: list[float] = field(default_factory=list)
    holds: list[float] = field(default_factory=list)
    """When the app held the answer's voice (voice_held lines: speech that may be a barge-in)."""
    releases: list[float] = field(default_factory=list)
    """When it played on after a hold (voice_released: that speech faded)."""
    last_line_at: float = 0.0
    runaway: bool = False
    # from the recordings
    question_end: float | None = None
    answer_start: float | None = None
    answer_end: float | None = None
    speech_start: float | None = None
    speech_end: float | None = None
    speech_match: float | None = None
    talk_over: float | None = None
    """The share of the user's voiced interruption during which the answer's echo was sounding (the speaker's
    recording, shifted by the room's delay): ~1 is double talk, 0 an interruption that fell in a gap of the answer
    (synthesis slower than real time leaves many)."""
    playback_stopped: float | None = None
    echo_delay_ms: float | None = None
    echo_correlation: float | None = None
    echo_delay_range_ms: tuple[float, float] | None = None
    """The shortest and longest delay among the answer's clear 1 s pieces: how steady the room held its delay."""
    echo_to_voice_db: float | None = None
    played_audio: NDArray[np.float32] | None = None
    """The speaker's recording of the interrupted answer, from its first sound to where playback stopped."""
    played_text: str | None = None
    echo_frames: tuple[int, int] | None = None
    """The microphone recording's frames of an echo-only answer (for ERLE)."""
    erle_db: float | None = None
    """ERLE of the canceller over the recordings (`cancelled_capture`)."""
    erle_live_db: float | None = None
    """ERLE of what the app's canceller handed on live (`live_output`; only when the run keeps its echo dump)."""

    @property
    def erle_frames(self) -> tuple[int, int] | None:
        """The frames ERLE is measured on: an echo-only answer's, unless it ran away (muted) or was not found."""
        return self.echo_frames if self.kind == "echo_only" and not self.runaway else None

    def take(self, line: str, at: float) -> None:
        self.last_line_at = at
        turn = read_line(line)
        if turn is None:
            return
        if turn.event == "turn_started" and turn.origin == "spoken":
            self.transcripts.append(turn.text.strip())
        elif turn.event == "turn_finished":
            self.finished.append(turn)
        elif turn.event == "barge_in" and turn.at is not None:
            self.barge_ins.append(turn.at)
        elif turn.event == "voice_held" and turn.at is not None:
            self.holds.append(turn.at)
        elif turn.event == "voice_released" and turn.at is not None:
            self.releases.append(turn.at)

    def settled(self, now: float, speaker_quiet: bool) -> bool:
        if not speaker_quiet:
            return False
        if not self.transcripts:
            return now - self.last_line_at >= MISS_S
        if self.interruption_played_at is not None and len(self.transcripts) < 2 and \
                now - self.last_line_at < INTERRUPTION_TURN_S:
            return False  # the interruption's own turn has not been transcribed yet
        return len(self.finished) >= len(self.transcripts) and now - self.last_line_at >= SETTLE_S

    @property
    def interrupted_line(self) -> TurnLine | None:
        """The turn the user's interruption cut: the first one finished as interrupted."""
        return next((f for f in self.finished if f.interrupted), None)

    @property
    def spoke_over_answer(self) -> bool:
        """The user's interruption really overlapped the answer (not after it had ended)."""
        return (self.speech_start is not None and self.answer_start is not None
                and self.answer_start < self.speech_start
                and (self.answer_end is None or self.speech_start < self.answer_end))

    def barge_in_sorting(self) -> BargeIns:
        if not self.spoke_over_answer:
            return BargeIns(None, tuple(self.barge_ins))
        return sort_barge_ins(self.barge_ins, self.speech_start, self.speech_end)

    def hold_sorting(self) -> BargeIns:
        """The holds sorted like the barge-ins, except that every hold over the user's speech (to DETECT_WINDOW_S
        after it) is theirs (an interruption's words, held and released between them): the first of those, and
        the holds no user speech made (the echo's), each a pause of the answer."""
        start, end = self.speech_start, self.speech_end
        if not self.spoke_over_answer or start is None or end is None:
            return BargeIns(None, tuple(self.holds))
        theirs = [t for t in self.holds if start <= t <= end + DETECT_WINDOW_S]
        return BargeIns(min(theirs, default=None), tuple(t for t in self.holds if t not in theirs))

    def pauses_ms(self, holds: Sequence[float]) -> list[float]:
        """How long each of these holds paused the answer: to the release that ended it (one a barge-in ended
        stopped the answer instead, and is not counted)."""
        ends = sorted([(t, True) for t in self.releases] + [(t, False) for t in self.barge_ins])
        out: list[float] = []
        for hold in holds:
            end = next((e for e in ends if e[0] >= hold), None)
            if end is not None and end[1]:
                out.append((end[0] - hold) * 1000)
        return out

    def history(self) -> HistoryCheck | None:
        line = self.interrupted_line
        if line is None or self.played_text is None or not self.barge_in_sorting().detected_at:
            return None
        return check_history(line.text, line.spoken if line.spoken is not None else line.text, self.played_text)

    def _after_speech_ms(self, at: float | None) -> float | None:
        """How long after the user's interruption began `at` came (None: either unknown)."""
        return None if at is None or self.speech_start is None else (at - self.speech_start) * 1000

    def sample(self) -> Sample:
        sorting = self.barge_in_sorting()
        detect = self._after_speech_ms(sorting.detected_at)
        stopped = None if detect is None else self._after_speech_ms(self.playback_stopped)
        felt = (None if self.question_end is None or self.answer_start is None
                else (self.answer_start - self.question_end) * 1000)
        holds = self.hold_sorting()
        held = self._after_speech_ms(holds.detected_at)
        history = self.history()
        line = self.interrupted_line
        return Sample(self.mode, 0.0, self.turn, {
            "barge_in_detect_ms": detect, "playback_stopped_ms": stopped, "felt_latency_ms": felt,
            "voice_held_ms": held,
        }, {
            "echo_db": self.echo_db, "delay_ms": self.delay_ms, "kind": self.kind,
            "question": self.question.text, "interrupt_after_s": self.interrupt_after_s,
            "answered": self.answer_start is not None, "spoke_over_answer": self.spoke_over_answer,
            "transcripts": self.transcripts, "answers": [f.text for f in self.finished],
            "false_barge_ins": len(sorting.false), "detected": sorting.detected_at is not None,
            "echo_turns": max(0, len(self.transcripts) - (2 if self.spoke_over_answer else 1)),
            "played_at_wall": round(time.time() - time.monotonic() + self.played_at, 3),
            "times_s": {name: None if value is None else round(value - self.played_at, 3) for name, value in (
                ("answer_start", self.answer_start), ("answer_end", self.answer_end),
                ("interruption_played", self.interruption_played_at), ("speech_start", self.speech_start),
                ("speech_end", self.speech_end), ("playback_stopped", self.playback_stopped))},
            "barge_ins_s": [round(t - self.played_at, 3) for t in self.barge_ins],
            "holds_s": [round(t - self.played_at, 3) for t in self.holds],
            "releases_s": [round(t - self.played_at, 3) for t in self.releases],
            "false_holds": len(holds.false),
            "false_hold_pauses_ms": [round(ms, 1) for ms in self.pauses_ms(holds.false)],
            "runaway": self.runaway,
            "speech_match": self.speech_match, "talk_over": self.talk_over,
            "echo_delay_ms": self.echo_delay_ms, "echo_correlation": self.echo_correlation,
            "echo_delay_range_ms": None if self.echo_delay_range_ms is None else list(self.echo_delay_range_ms),
            "echo_to_voice_db": self.echo_to_voice_db, "erle_db": self.erle_db,
            "erle_live_db": self.erle_live_db,
            "interrupted_answer": None if line is None else line.text,
            "history": None if line is None else line.spoken,
            "played_words": self.played_text,
            "history_check": None if history is None else history.__dict__,
        })


def _double_talk(detail: dict[str, Any]) -> bool:
    """The user spoke over the answer's echo for at least DOUBLE_TALK of their interruption."""
    return (detail.get("talk_over") or 0.0) >= DOUBLE_TALK


def summary_for(samples: Sequence[Sample]) -> dict[str, Any]:
    """The figures of one mode (or one mode at one echo level), in the schema the issue asks for and a few more."""
    detail = [s.detail for s in samples]
    detect = summarize(v for s in samples if (v := s.metrics.get("barge_in_detect_ms")) is not None)
    stopped = summarize(v for s in samples if (v := s.metrics.get("playback_stopped_ms")) is not None)
    held = summarize(v for s in samples if (v := s.metrics.get("voice_held_ms")) is not None)
    pauses = summarize(ms for d in detail for ms in d.get("false_hold_pauses_ms", ()))
    felt = summarize(v for s in samples if (v := s.metrics.get("felt_latency_ms")) is not None)
    erle = [d["erle_db"] for d in detail if d["kind"] == "echo_only" and d["erle_db"] is not None]
    erle_live = [d["erle_live_db"] for d in detail if d["kind"] == "echo_only" and d.get("erle_live_db") is not None]
    delays = summarize(d["echo_delay_ms"] for d in detail if d["echo_delay_ms"] is not None)
    ratio = summarize(d["echo_to_voice_db"] for d in detail if d["echo_to_voice_db"] is not None)
    checked = [d["history_check"] for d in detail if d["history_check"] is not None]
    return {
        "answers": sum(1 for d in detail if d["answered"]),
        "echo_only_answers": sum(1 for d in detail if d["answered"] and d["kind"] == "echo_only"),
        "false_barge_ins": sum(d["false_barge_ins"] for d in detail),
        "echo_turns": sum(d["echo_turns"] for d in detail),
        "barge_ins": sum(1 for d in detail if d["spoke_over_answer"]),
        "barge_ins_detected": sum(1 for d in detail if d["spoke_over_answer"] and d["detected"]),
        "barge_ins_in_double_talk": sum(1 for d in detail if d["spoke_over_answer"] and _double_talk(d)),
        "barge_ins_in_double_talk_detected": sum(1 for d in detail if d["spoke_over_answer"] and _double_talk(d)
                                                 and d["detected"]),
        "barge_in_detect_p50_ms": None if detect is None else round(detect.p50, 1),
        "barge_in_detect_p95_ms": None if detect is None else round(detect.p95, 1),
        "playback_stopped_p50_ms": None if stopped is None else round(stopped.p50, 1),
        "voice_held_p50_ms": None if held is None else round(held.p50, 1),
        "voice_held_p95_ms": None if held is None else round(held.p95, 1),
        "false_holds": sum(d.get("false_holds", 0) for d in detail),
        "holds_released": sum(len(d.get("releases_s", ())) for d in detail),
        "false_hold_pause_p50_ms": None if pauses is None else round(pauses.p50, 1),
        "erle_db": round(float(np.median(erle)), 1) if erle else None,
        "erle_live_db": round(float(np.median(erle_live)), 1) if erle_live else None,
        "history_matches": sum(1 for c in checked if c["matches"]),
        "history_checked": len(checked),
        "felt_latency_p50_ms": None if felt is None else round(felt.p50, 1),
        "felt_latency_p95_ms": None if felt is None else round(felt.p95, 1),
        "echo_delay_p50_ms": None if delays is None else round(delays.p50, 1),
        "echo_to_voice_p50_db": None if ratio is None else round(ratio.p50, 1),
        "runaway_turns": sum(1 for d in detail if d["runaway"]),
    }


def summary_by_mode(samples: Sequence[Sample], modes: Sequence[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        mine = [s for s in samples if s.variant == mode]
        levels = sorted({s.detail["echo_db"] for s in mine})
        out[mode] = {**summary_for(mine), "by_echo_db": {
            f"{level:g}": summary_for([s for s in mine if s.detail["echo_db"] == level]) for level in levels}}
    return out


# --- the run ------------------------------------------------------------------------------------------------


def _question(name: str, text: str, work: Path) -> Question:
    """`text` spoken by espeak-ng, at 16 kHz (the recordings' rate, so the matched filter needs no resampling)."""
    from voicecli.audio.resample import resample

    samples, rate = espeak_speech(text, work)
    samples = resample(samples, rate, RECORD_RATE)
    lead = np.zeros(round(LEAD_IN_S * RECORD_RATE), dtype=np.float32)
    samples = np.concatenate([lead, samples.astype(np.float32), lead])
    path = work / f"{name}.wav"
    write_wav_int16(path, samples, RECORD_RATE)
    span = sound_span(samples, RECORD_RATE)
    if span is None:
        raise BenchError(f"espeak-ng said nothing audible for {text!r}")
    return Question(name, text, path, RECORD_RATE, len(samples) / RECORD_RATE, span[0] / RECORD_RATE,
                    span[1] / RECORD_RATE, ())


def _read_question(question: Question) -> NDArray[np.float32]:
    import soundfile

    return np.asarray(soundfile.read(str(question.path), dtype="float32")[0], dtype=np.float32)


class DuplexRunner:
    """One mode: the app started, questions asked at each echo level, interruptions spoken over answers."""

    def __init__(self, pulse: PrivatePulse, app: App, router: EchoRouter, mode: str, seed: int,
                 bar: BenchProgress | None) -> None:
        self.pulse = pulse
        self.app = app
        self.router = router
        self.mode = mode
        self.seed = seed
        self.bar = bar
        self.mic = pulse.record(MIC_SOURCE, rate=RECORD_RATE)
        self.speaker = pulse.record(SPEAKER_MONITOR, rate=RECORD_RATE)
        self.quiet = QuietWatch(self.speaker, QUIET_S, time.monotonic())

    def close(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Stop recording; the whole microphone and speaker recordings."""
        return self.mic.stop(), self.speaker.stop()

    def _audible(self) -> bool:
        return self.speaker.recent_dbfs(0.05) > AUDIBLE_DBFS

    @property
    def quiet_since(self) -> float:
        """When the speaker last had sound (QuietWatch)."""
        return self.quiet.since

    def _speaker_quiet(self, now: float) -> bool:
        return self.quiet.quiet(now)

    def _pump(self, current: DuplexTurn | None, done: Callable[[float], bool], what: str) -> None:
        """Hand the app's lines to `current` until `done(now)` (App.pump), watching the speaker's quiet and an
        answer that runs away (the app answering its own echo: the room is muted until the speaker is quiet)."""
        def tick(now: float) -> None:
            self._speaker_quiet(now)
            if current is not None and not current.runaway and now - current.played_at > RUNAWAY_S:
                current.runaway = True
                self.router.set_gain_db(MUTED_DB)

        self.app.pump(None if current is None else current.take, done, TURN_TIMEOUT_S, f"({self.mode}) {what}", tick)

    def ask(self, turn: DuplexTurn, interruption: Question, previous: DuplexTurn | None, gain_db: float) -> None:
        start = time.monotonic()
        self._pump(previous, lambda now: now - max(start, self.quiet_since) >= GAP_S, "before the next question")
        self.router.set_gain_db(gain_db)
        turn.played_at = time.monotonic()
        turn.last_line_at = turn.played_at
        self.pulse.play_into_mic(turn.question.path)
        if turn.kind == "interrupted":
            self._pump(turn, lambda now: self._audible() or turn.settled(now, self._speaker_quiet(now)),
                       "waiting for the answer")
            onset = time.monotonic()
            assert turn.interrupt_after_s is not None
            self._pump(turn, lambda now: now >= onset + (turn.interrupt_after_s or 0.0) or self._speaker_quiet(now),
                       "during the answer")
            if not self._speaker_quiet(time.monotonic()):
                turn.interruption_played_at = time.monotonic()
                self.pulse.play_into_mic(interruption.path, wait=False)
        self._pump(turn, lambda now: turn.settled(now, self._speaker_quiet(now)), f"after {turn.question.name}")

    def mark(self, turn: DuplexTurn, until: float, interruption: NDArray[np.float32], voiced: tuple[float, float],
             voice_db: float | None) -> None:
        """The audio marks of one turn from the two recordings (see the module docstring)."""
        mic, speaker = self.mic, self.speaker
        start = max(0, int(mic.frame_at(turn.played_at - 0.05)))
        begin = max(0, int(speaker.frame_at(turn.played_at)))
        end = int(speaker.frame_at(until))
        played = speaker.samples(begin, end)
        span = sound_span(played, RECORD_RATE)
        if span is None:
            return
        turn.answer_start = speaker.time_of_frame(begin + span[0])
        heard = mic.samples(start, int(mic.frame_at(turn.answer_start)))
        question = sound_span(heard, RECORD_RATE)
        if question is not None:
            turn.question_end = mic.time_of_frame(start + question[1])
        turn.answer_end = speaker.time_of_frame(begin + span[1])
        if turn.interruption_played_at is not None:
            self._mark_interruption(turn, interruption, voiced, begin + span[0], end)
        else:
            self._mark_echo(turn, begin + span[0], begin + span[1], voice_db)

    def _mark_echo(self, turn: DuplexTurn, first: int, last: int, voice_db: float | None) -> None:
        """The echo as the microphone heard it: delay and likeness to the speaker (medians over 1 s pieces,
        find_echo_piecewise), level over the user's voice, and the canceller's ERLE on it."""
        answer = self.speaker.samples(first, last)
        mic_first = int(self.mic.frame_at(self.speaker.time_of_frame(first)))
        captured = self.mic.samples(mic_first, mic_first + len(answer) + RECORD_RATE // 2)
        found = [estimate for _, estimate in find_pieces(answer, captured, RECORD_RATE)]
        estimate = median_estimate(found)
        if estimate is not None:
            turn.echo_delay_ms = estimate.lag_s * 1000
            turn.echo_correlation = estimate.correlation
        clear = [e.lag_s * 1000 for e in found if e.correlation >= CLEAR_PIECE]
        if clear:
            turn.echo_delay_range_ms = (min(clear), max(clear))
        level = active_dbfs(captured, RECORD_RATE)
        if level is not None and voice_db is not None and not turn.runaway:
            turn.echo_to_voice_db = level - voice_db
        turn.echo_frames = (mic_first, mic_first + len(captured))

    def _mark_interruption(self, turn: DuplexTurn, interruption: NDArray[np.float32], voiced: tuple[float, float],
                           answer_first: int, end: int) -> None:
        assert turn.interruption_played_at is not None
        first = max(0, int(self.mic.frame_at(turn.interruption_played_at - 0.1)))
        window = self.mic.samples(first, first + len(interruption) + RECORD_RATE)
        found = find_echo(interruption, window, RECORD_RATE, max_lag_s=1.0)
        if found is None:
            return
        turn.speech_match = found.correlation
        file_start = first + round(found.lag_s * RECORD_RATE)
        turn.speech_start = self.mic.time_of_frame(file_start + round(voiced[0] * RECORD_RATE))
        turn.speech_end = self.mic.time_of_frame(file_start + round(voiced[1] * RECORD_RATE))
        lag = turn.delay_ms / 1000  # the echo sounds in the microphone that much after the speaker
        heard = self.speaker.samples(int(self.speaker.frame_at(turn.speech_start - lag)),
                                     int(self.speaker.frame_at(turn.speech_end - lag)))
        turn.talk_over = audible_share(heard, RECORD_RATE)
        # playback stopped: where the silence the barge-in left on the speaker began (see stop_window)
        after = int(self.speaker.frame_at(turn.speech_start))
        rest = self.speaker.samples(after, end)
        size = RECORD_RATE // 100
        count = len(rest) // size
        if count == 0:
            return
        power = np.mean(np.square(rest[:count * size].reshape(count, size)), axis=1)
        quiet = power <= 10 ** (AUDIBLE_DBFS / 10)
        detected = turn.barge_in_sorting().detected_at
        dropped = None if detected is None else \
            int((self.speaker.frame_at(detected + STOP_MARGIN_S) - after) // size)
        stopped_at = stop_window(quiet, round(STOPPED_QUIET_S * 100), dropped)
        if stopped_at is None:
            return
        stop = after + stopped_at * size
        turn.playback_stopped = self.speaker.time_of_frame(stop)
        turn.played_audio = self.speaker.samples(answer_first, stop)


@dataclass(frozen=True)
class Timing:
    """A finished recording's frame <-> time.monotonic() mapping, vectorised: Recorder.time_of_frame taken once a
    second and interpolated between (its error is ~10 ms anyway, and a block-by-block call would cost seconds)."""

    frames: NDArray[np.float64]
    times: NDArray[np.float64]

    @classmethod
    def of(cls, recorder: Recorder, frames: int) -> Timing:
        """The mapping of a recording `frames` long (or one saved earlier: `Timing(frames, times)`)."""
        marks = np.arange(0, max(frames, 1) + RECORD_RATE, RECORD_RATE, dtype=np.float64)
        return cls(marks, np.array([recorder.time_of_frame(f) for f in marks]))

    def time(self, frame: float) -> float:
        return float(np.interp(frame, self.frames, self.times))

    def frame(self, when: float) -> float:
        return float(np.interp(when, self.times, self.frames))


def cancelled_capture(session: Session, double_talk: list[bool] | None = None) -> NDArray[np.float32] | None:
    """The microphone recording as the app's echo canceller cleans it: the project's EchoCanceller fed with the
    speaker's recording as its far-end reference (each block at the time the speaker played it), the microphone in
    32 ms blocks (the app's until 2026-12-06; it takes 10 ms blocks now, cancelled in the same 10 ms frames) at the
    times they were heard; one canceller over the whole mode, as the app runs one.
    None when the canceller's binding is not installed. Output sample k is input sample k (whole frames, in order).
    Given `double_talk`, the canceller's `double_talk` after each block is appended to it (the listener holds the
    answer on it)."""
    from voicecli.audio.echo_cancel import EchoCanceller, EchoCancellerUnavailable
    from voicecli.audio.far_end import FarEndReference

    mic, mic_timing, speaker, speaker_timing = session.mic, session.mic_timing, session.speaker, session.speaker_timing
    reference = FarEndReference()
    try:
        canceller = EchoCanceller(reference)
    except EchoCancellerUnavailable:
        return None
    block = 512
    pushed = 0
    out: list[NDArray[np.float32]] = []
    for start in range(0, len(mic) - block + 1, block):
        at = mic_timing.time(start + block - 1)
        until = min(len(speaker), int(speaker_timing.frame(at)) + 1)
        while pushed < until:
            size = min(block, until - pushed)
            reference.push(speaker[pushed:pushed + size], RECORD_RATE, speaker_timing.time(pushed))
            pushed += size
        cleaned, _ = canceller.process(mic[start:start + block], at)
        out.append(cleaned)
        if double_talk is not None:
            double_talk.append(canceller.double_talk)
    return np.concatenate(out) if out else np.zeros(0, np.float32)


LIVE_CHUNK_S = 2.0
"""`live_output`: the span of the canceller's dump laid on the recording at one offset."""
LIVE_SEARCH_S = 0.1
"""`live_output`: how far either side of its block time a span's place is looked for."""


def best_match(piece: NDArray[np.float32], window: NDArray[np.float32]) -> tuple[int, float]:
    """Where in `window` (longer) `piece` matches best, by cross-correlation, and the normalised correlation there."""
    size = 1 << (len(window) + len(piece)).bit_length()
    score = np.fft.irfft(np.fft.rfft(window, size) * np.conj(np.fft.rfft(piece, size)), size)
    best = int(np.argmax(score[: len(window) - len(piece) + 1]))
    match = window[best : best + len(piece)]
    return best, float(score[best]) / max(float(np.linalg.norm(piece) * np.linalg.norm(match)), 1e-12)


def live_output(session: Session, folder: Path, out: NDArray[np.float32] | None = None) -> NDArray[np.float32] | None:
    """What the app's canceller handed on live (the `out` of its echo dump in `folder`, voicecli.audio.echo_dump; or
    `out`, a signal of the dump's length), laid on the session's microphone recording; None without a dump. The
    dump's capture is the recording itself, but the app's block times and the recorder's disagree by up to ~40 ms,
    so each LIVE_CHUNK_S is placed where its capture matches the recording (within LIVE_SEARCH_S of its block time;
    silent ones: as the chunk before)."""
    from voicecli.audio.echo_dump import COLUMNS, load_dump
    from voicecli.audio.rates import SPEECH_RATE

    audio, blocks = load_dump(folder) if (folder / "out.f32").exists() else ({}, None)
    out, capture = audio.get("out") if out is None else out, audio.get("capture")
    if out is None or capture is None or blocks is None:
        return None
    ends = np.cumsum(blocks[:, COLUMNS.index("samples")]) - 1  # each block's last sample, stamped `at`
    stamps = blocks[:, COLUMNS.index("at")]
    mic, chunk, search = session.mic, round(LIVE_CHUNK_S * SPEECH_RATE), round(LIVE_SEARCH_S * SPEECH_RATE)
    placed = np.zeros(len(mic), np.float32)
    offset: int | None = None  # microphone frame minus dump sample
    for first in range(0, len(capture), chunk):
        piece = capture[first : first + chunk]
        guess = round(session.mic_timing.frame(float(np.interp(first, ends, stamps))))
        low = max(0, guess - search)
        window = mic[low : guess + len(piece) + search]
        if len(window) > len(piece) and np.any(piece):
            best, correlation = best_match(piece, window)
            if correlation > 0.9:
                offset = low + best - first
        if offset is not None:
            at = first + offset
            span = slice(max(at, 0), min(at + len(piece), len(placed)))
            placed[span] = out[first + span.start - at : first + span.stop - at]
    return placed


def measure_erle(turns: Sequence[DuplexTurn], mic: NDArray[np.float32], cancelled: NDArray[np.float32],
                 live: NDArray[np.float32] | None = None) -> None:
    """Each echo-only answer's ERLE: the microphone's level over the canceller's output on its frames; over the
    canceller's live output too (`live_output`) where the run kept it."""
    for turn in turns:
        if (span := turn.erle_frames) is not None:
            turn.erle_db = span_erle(mic, cancelled, span)
            if live is not None:
                turn.erle_live_db = span_erle(mic, live, span)


def span_erle(mic: NDArray[np.float32], cancelled: NDArray[np.float32], span: tuple[int, int]) -> float | None:
    """ERLE over one answer's frames of the microphone recording (None: under half a second of it)."""
    from voicecli.audio.echo_cancel import erle_db

    first, last = span[0], min(span[1], len(cancelled))
    return erle_db(mic[first:last], cancelled[first:last]) if last - first > RECORD_RATE // 2 else None


@dataclass(frozen=True)
class Plan:
    """What one run asks: the modes, the echo levels over the user's voice, the delays (an app session each) and
    turns per level."""

    modes: tuple[str, ...]
    echo_db: tuple[float, ...]
    delays_ms: tuple[float, ...]
    turns: int
    seed: int = 0
    keep_audio: Path | None = None
    """Where to save each session's recordings (`save_session`), for replaying the canceller offline, and with
    "aec" what the app's canceller was fed live (audio.echo_dump, a folder per session); None: not."""
    app_log: Path | None = None
    """Where to keep each session's app log at info level (`session_command`); None: only its stderr's tail."""


def session_command(command: list[str], plan: Plan, mode: str, delay_ms: float) -> list[str]:
    """The app's command for one session: with `plan.app_log`, logging at info level (the echo canceller's delay
    estimates and follows, the listener's holds) to `<mode>-<delay>ms.log` there. Why: what the canceller did live
    is not in the recordings (a replay cancels them afresh), and the last diagnosis needed a patched checkout; the
    log's wall-clock times meet the turns' through each turn's `played_at_wall`."""
    if plan.app_log is None:
        return command
    return [*command, "--log-level", "info", "--log-file", str(plan.app_log / f"{mode}-{delay_ms:g}ms.log")]


@dataclass(frozen=True)
class Voices:
    """The run's fixed audio: the questions, the interruption, and the levels the echo gain is set from."""

    questions: tuple[Question, ...]
    interruption: Question
    voice_db: float
    """The user's voice: the questions' speech level (active_dbfs) as played into the microphone."""
    assistant_db: float
    """The app's voice: a sentence spoken by the endpoint with the configured voice, at the level it plays."""

    def gain_db(self, echo_db: float) -> float:
        """The router's gain that makes the echo `echo_db` louder than the user (the room has unit energy)."""
        return self.voice_db + echo_db - self.assistant_db


CALIBRATION = "This sentence sets the level of the echo, the way the assistant speaks."


def run_mode(pulse: PrivatePulse, router: EchoRouter, command: list[str], env: dict[str, str], mode: str,
             plan: Plan, voices: Voices, bar: BenchProgress | None) -> list[DuplexTurn]:
    """Every echo delay of the plan in `mode`, each in an app session of its own; the turns come back marked.

    Why a session per delay: a room's echo delay does not change between one answer and the next, and an echo path
    that did (the earlier bench cycled 40 / 80 / 120 ms from answer to answer) measures how fast the canceller
    re-finds a delay 10-20 times a minute, not how well it cancels a room; tests/audio/test_echo_cancel.py measures
    that case on its own."""
    done: list[DuplexTurn] = []
    for delay_ms in plan.delays_ms:
        done += run_session(pulse, router, command, env, mode, delay_ms, plan, voices, bar, len(done))
    return done


def run_session(pulse: PrivatePulse, router: EchoRouter, command: list[str], env: dict[str, str], mode: str,
                delay_ms: float, plan: Plan, voices: Voices, bar: BenchProgress | None,
                first_index: int) -> list[DuplexTurn]:
    """Start the app in `mode` with the echo `delay_ms` late, run every echo level's turns, stop it; the turns come
    back marked from audio (questions and interruption times go on from `first_index`)."""
    if bar is not None:
        bar.describe(f"{mode}, echo {delay_ms:g} ms: starting the app (Whisper, LLM, endpoint connection)")
    router.set_target_delay_ms(delay_ms)
    if plan.app_log is not None:
        plan.app_log.mkdir(parents=True, exist_ok=True)
    kept = None if plan.keep_audio is None else plan.keep_audio / f"{mode}-{delay_ms:g}ms"  # + .npz: the recordings
    if kept is not None and mode == "aec":  # the canceller's live inputs too (voicecli.audio.echo_dump)
        env = {**env, "VOICECLI_AUDIO__ECHO_DUMP": str(kept)}
    app = App(session_command(command, plan, mode, delay_ms), env)
    interruption = _read_question(voices.interruption)
    voiced = (voices.interruption.voiced_start_s, voices.interruption.voiced_end_s)
    done: list[DuplexTurn] = []
    try:
        app.wait_listening(STARTUP_TIMEOUT_S)
        runner = DuplexRunner(pulse, app, router, mode, plan.seed, bar)
        try:
            previous: DuplexTurn | None = None
            index = first_index
            for echo_db in plan.echo_db:
                for number in range(plan.turns):
                    kind = kind_of(number)
                    turn = DuplexTurn(mode, echo_db, delay_ms, number, kind,
                                      voices.questions[index % len(voices.questions)], 0.0,
                                      interrupt_after_s(plan.seed, index) if kind == "interrupted" else None)
                    index += 1
                    if bar is not None:
                        bar.describe(f"{mode}, echo {delay_ms:g} ms {echo_db:+g} dB, turn {number + 1}/{plan.turns} "
                                     f"({kind.replace('_', ' ')})")
                    runner.ask(turn, voices.interruption, previous, voices.gain_db(echo_db))
                    if previous is not None:
                        runner.mark(previous, turn.played_at, interruption, voiced, voices.voice_db)
                    done.append(turn)
                    previous = turn
                    if bar is not None:
                        bar.step()
            if previous is not None:
                end = time.monotonic()
                last = previous
                runner._pump(last, lambda now: now - max(end, runner.quiet_since) >= GAP_S + SETTLE_S,
                             "after the last question")
                runner.mark(last, time.monotonic(), interruption, voiced, voices.voice_db)
        finally:
            mic, speaker = runner.close()
    finally:
        app.stop()
    session = Session(mic, Timing.of(runner.mic, len(mic)), speaker, Timing.of(runner.speaker, len(speaker)))
    if kept is not None:
        save_session(Path(f"{kept}.npz"), session, done)
    if mode == "aec":
        if bar is not None:
            bar.describe(f"{mode}, echo {delay_ms:g} ms: the canceller over the recordings (ERLE)")
        cancelled = cancelled_capture(session)
        if cancelled is not None:
            measure_erle(done, mic, cancelled, None if kept is None else live_output(session, kept))
    return done


@dataclass(frozen=True)
class Session:
    """One app session's two recordings, each with its frame <-> monotonic time mapping: what the canceller is fed
    offline (`cancelled_capture`), in the run or replayed from a saved file (`load_session`)."""

    mic: NDArray[np.float32]
    mic_timing: Timing
    speaker: NDArray[np.float32]
    speaker_timing: Timing


def save_session(path: Path, session: Session, turns: Sequence[DuplexTurn]) -> None:
    """The session's recordings, their timings and its echo-only answers' spans in the microphone recording, in
    one .npz (the float32 samples as recorded, ~3 MB a minute): `voicecli bench duplex --keep-audio DIR` keeps them
    so that a change to the canceller can be measured on the very same audio (scripts/duplex_replay.py) instead of
    a new, noisier run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    spans = [span for t in turns if (span := t.erle_frames) is not None]
    np.savez_compressed(
        path, mic=session.mic, speaker=session.speaker,
        mic_frames=session.mic_timing.frames, mic_times=session.mic_timing.times,
        speaker_frames=session.speaker_timing.frames, speaker_times=session.speaker_timing.times,
        echo_only_frames=np.array(spans, dtype=np.int64).reshape(-1, 2))


def replay_erle(path: Path) -> list[float] | None:
    """Each echo-only answer's ERLE as this checkout's canceller computes it on a session `save_session` wrote (the
    run's own figures when the canceller is unchanged); None without the canceller's binding."""
    session, spans = load_session(path)
    cancelled = cancelled_capture(session)
    if cancelled is None:
        return None
    return [erle for span in spans if (erle := span_erle(session.mic, cancelled, span)) is not None]


def live_erle(path: Path) -> list[float] | None:
    """Each echo-only answer's ERLE as the app's canceller got it live, from the echo dump kept beside a session
    `save_session` wrote (`live_output`); None without a dump."""
    session, spans = load_session(path)
    live = live_output(session, path.with_suffix(""))
    if live is None:
        return None
    return [erle for span in spans if (erle := span_erle(session.mic, live, span)) is not None]


def load_session(path: Path) -> tuple[Session, list[tuple[int, int]]]:
    """A session `save_session` wrote, and its echo-only answers' spans (microphone frames)."""
    with np.load(path) as saved:
        session = Session(saved["mic"].astype(np.float32),
                          Timing(saved["mic_frames"], saved["mic_times"]),
                          saved["speaker"].astype(np.float32),
                          Timing(saved["speaker_frames"], saved["speaker_times"]))
        spans = [(int(a), int(b)) for a, b in saved["echo_only_frames"]]
    return session, spans


def transcribe_played(turns: Sequence[DuplexTurn], config: Config) -> None:
    """The words each interrupted answer really played, by the project's Whisper (after the app stopped, so it
    competes with nothing that is timed)."""
    from voicecli.listen.transcription import transcriber_from_config

    todo = [t for t in turns if t.played_audio is not None]
    if not todo:
        return
    transcriber = transcriber_from_config(config)
    try:
        for turn in todo:
            assert turn.played_audio is not None
            turn.played_text = transcriber.transcribe_sync(turn.played_audio).text.strip()
    finally:
        transcriber.close()


def prepare_voices(work: Path, config: Config, target: Target) -> Voices:
    questions = tuple(_question(f"q{i:02d}", text, work) for i, text in enumerate(QUESTIONS))
    interruption = _question("interruption", INTERRUPTION, work)
    levels = [level for q in questions if (level := active_dbfs(_read_question(q), RECORD_RATE)) is not None]
    speech, rate = kokoro_speech(CALIBRATION, config.tts.voice, config.tts.speed, target.url, target.token)
    assistant = active_dbfs(speech, rate)
    if not levels or assistant is None:
        raise BenchError("the calibration voices were silent (espeak-ng or the endpoint said nothing audible)")
    return Voices(questions, interruption, 10 * math.log10(float(np.mean([10 ** (v / 10) for v in levels]))),
                  assistant)


async def _bench(args: argparse.Namespace, config: Config, plan: Plan) -> BenchResult:
    with tempfile.TemporaryDirectory(prefix="voicecli-duplex-") as tmp, \
            BenchProgress(None, "bench duplex") as bar:
        work = Path(tmp)
        target = await resolve_target(config, bar.note)
        samples: list[Sample] = []
        skipped: list[str] = []
        calibration: dict[str, Any] = {}
        try:
            bar.describe("voicing the questions, measuring the voices' levels")
            voices = await asyncio.to_thread(prepare_voices, work, config, target)
            runnable: list[tuple[str, dict[str, str]]] = []
            for mode in plan.modes:
                env = mode_env(mode, config)
                if env is None:
                    skipped.append(mode)
                    bar.note(f"{mode}: skipped, this build has no audio.echo setting (no echo canceller yet)")
                else:
                    runnable.append((mode, env))
            bar.set_total(len(runnable) * len(plan.delays_ms) * len(plan.echo_db) * plan.turns)
            machine = machine_info(await endpoint_stats(target))
            try:
                with PrivatePulse() as pulse, \
                        EchoRouter(pulse, plan.delays_ms[0], MUTED_DB, plan.seed) as router:
                    bar.describe("measuring the echo path's own latency")
                    measured = await asyncio.to_thread(router.calibrate, work)
                    calibration = {"router_own_latency_ms": round(measured.lag_s * 1000, 1),
                                   "router_correlation": round(measured.correlation, 3),
                                   "router_calibration_lags_ms": router.calibration_lags_ms}
                    for mode, env in runnable:
                        child = {**APP_DEFAULTS, **pulse.child_env(), "XDG_STATE_HOME": str(work / "state"),
                                 "PYTHONUNBUFFERED": "1", **APP_ENV, **env}
                        command = app_command(config, target, "bidi", getattr(args, "config", None))
                        turns = await asyncio.to_thread(run_mode, pulse, router, command, child, mode, plan, voices,
                                                        bar)
                        bar.describe(f"{mode}: transcribing what was played before each barge-in")
                        await asyncio.to_thread(transcribe_played, turns, config)
                        samples += [t.sample() for t in turns]
            except PulseUnavailable as exc:
                raise BenchError(f"bench duplex needs a PulseAudio daemon of its own: {exc}") from exc
            finish_machine_info(machine)
        finally:
            target.close()
    return build_result(args.name or default_name("duplex"), samples, config, plan, voices, calibration, skipped,
                        machine, target)


def build_result(name: str, samples: list[Sample], config: Config, plan: Plan, voices: Voices,
                 calibration: dict[str, Any], skipped: list[str], machine: dict[str, Any],
                 target: Target) -> BenchResult:
    modes = [m for m in plan.modes if m not in skipped]
    result = BenchResult(
        kind="duplex", name=name,
        settings={"modes": modes, "modes_skipped": skipped, "turns_per_echo_level": plan.turns,
                  "echo_over_voice_db": list(plan.echo_db), "echo_delays_ms": list(plan.delays_ms),
                  "seed": plan.seed, "questions": [q.text for q in voices.questions],
                  "interruption": voices.interruption.text, "interrupt_after_s": list(INTERRUPT_AFTER_S),
                  "user_voice_dbfs": round(voices.voice_db, 1), "assistant_voice_dbfs": round(voices.assistant_db, 1),
                  **calibration, "llm": llm_label(config), "stt_model": config.stt.model, "voice": config.tts.voice,
                  "endpoint": target.url, "echo_margin_db": config.audio.echo_margin_db,
                  "barge_in_ms": config.audio.barge_in_ms, "barge_in_sure_ms": config.audio.barge_in_sure_ms,
                  "barge_in_hold_ms": config.audio.barge_in_hold_ms, "echo_leak_gate": config.audio.echo_leak_gate,
                  "echo_double_talk": config.audio.echo_double_talk, "app_env": APP_ENV,
                  "app_defaults": {key: os.environ.get(key, value) for key, value in APP_DEFAULTS.items()},
                  "record_rate": RECORD_RATE, "audible_dbfs": AUDIBLE_DBFS},
        machine=machine, samples=samples)
    result.extra["summary_by_mode"] = summary_by_mode(samples, modes)
    result.notes = [
        "The app is `voicecli chat --no-tui` with real models on a private PulseAudio; the echo path "
        "(voicecli/bench/echo_path.py) carries its speaker into its microphone through a seeded synthetic room.",
        "false_barge_ins: barge-ins the app reported while the user was silent (all of an echo-only turn's, and an "
        "interrupted turn's before the user spoke or more than "
        f"{DETECT_WINDOW_S:g} s after they stopped); echo_turns: spoken turns the app started from its own echo.",
        "Detection time: from the user's first voiced sample as the microphone heard it (found by matched filter) "
        "to the app's BargeIn (its speech-start block), one CLOCK_MONOTONIC; playback stopped: to the speaker's "
        f"first {STOPPED_QUIET_S * 1000:.0f} ms of silence after it.",
        "over echo: the share of the user's interruption during which the answer's echo was sounding (the speaker's "
        "recording, shifted by the room's delay); 'of them in double talk' counts the barge-ins with at least half "
        "of it over the echo (the others fell in a gap of the answer, where there is no echo to hear through).",
        "history_matches: the interrupted turn's history is a prefix of its answer and within one word of the words "
        "played (the speaker's recording up to the stop, transcribed by Whisper and matched to the answer).",
        "erle_db: the median over echo-only turns of the microphone's level over the canceller's output, the "
        "project's canceller run over the recordings; null when the project has no canceller to run. erle_live_db: "
        "the same over what the app's canceller handed on live (its echo dump, kept with --keep-audio; null "
        "without).",
        *(f"{mode}: not run: this build has no audio.echo setting" for mode in skipped),
    ]
    return result


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _db(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _range(span: list[float] | None) -> str:
    """" (min-max)" of a per-piece range, nothing without one (results saved before it was measured)."""
    return "" if span is None else f" ({span[0]:,.0f}-{span[1]:,.0f})"


def table_row(label: str, echo: str, row: dict[str, Any]) -> str:
    history = f"{row['history_matches']} / {row['history_checked']}"
    return (f"| {label} | {echo} | {row['answers']} | {row['echo_only_answers']} | **{row['false_barge_ins']}** | "
            f"{row['echo_turns']} | {row['barge_ins_detected']} / {row['barge_ins']} | "
            f"{row.get('barge_ins_in_double_talk_detected', '–')} / {row.get('barge_ins_in_double_talk', '–')} | "
            f"{_ms(row['barge_in_detect_p50_ms'])} / {_ms(row['barge_in_detect_p95_ms'])} | "
            f"{_ms(row['playback_stopped_p50_ms'])} | {_ms(row.get('voice_held_p50_ms'))} / "
            f"{_ms(row.get('voice_held_p95_ms'))} | {row.get('false_holds', '–')} "
            f"({_ms(row.get('false_hold_pause_p50_ms'))}) | {row.get('holds_released', '–')} | "
            f"{_db(row['erle_db'])} / {_db(row.get('erle_live_db'))} | {history} | "
            f"{_ms(row['felt_latency_p50_ms'])} | {_ms(row['echo_delay_p50_ms'])} | "
            f"{_db(row['echo_to_voice_p50_db'])} |")


def bursts_note(settings: dict[str, Any]) -> str:
    """", the median of bursts at 25.1 / 306.9 / 24.8 ms": how steady the path was as it was calibrated (empty for
    results saved before the router calibrated with several bursts)."""
    lags = settings.get("router_calibration_lags_ms")
    return f", the median of bursts at {' / '.join(f'{lag:g}' for lag in lags)} ms" if lags else ""


def render_markdown(result: BenchResult) -> str:
    settings = result.settings
    by_mode: dict[str, dict[str, Any]] = result.extra["summary_by_mode"]
    lines = [
        f"# voicecli bench duplex: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"LLM: {settings['llm']}; STT {settings['stt_model']}; voice {settings['voice']}; "
        f"{settings['turns_per_echo_level']} turns per mode and echo level (echo-only and interrupted alternate); "
        f"echo delays {', '.join(f'{d:g}' for d in settings['echo_delays_ms'])} ms, an app session each "
        f"(router's own latency {settings.get('router_own_latency_ms', '?')} ms{bursts_note(settings)}); "
        f"user voice {settings['user_voice_dbfs']} dBFS, "
        f"assistant {settings['assistant_voice_dbfs']} dBFS; barge-in after "
        f"{settings.get('barge_in_ms', 250)} ms of speech (audio.barge_in_ms; "
        f"{settings.get('barge_in_sure_ms', 0)} when the voice detector is sure of it, audio.barge_in_sure_ms, 0: "
        f"off), the voice held after "
        f"{settings.get('barge_in_hold_ms', 0)} (audio.barge_in_hold_ms, 0: off); echo the canceller let through "
        f"muted: {'yes' if settings.get('echo_leak_gate') else 'no'} (audio.echo_leak_gate); the voice held on "
        f"double talk told: {'yes' if settings.get('echo_double_talk') else 'no'} (audio.echo_double_talk).",
        "",
        "Voice held: from the user's first voiced sample to the app holding the answer's voice (a pause, nothing "
        "dropped) for that speech; a hold without the user is a pause no user speech made (the echo's; its pause: "
        "to the release that played on), and a released hold played on where it paused.",
        "",
        "| mode | echo over voice | answers | echo-only answers | false barge-ins | echo turns | barge-ins detected | "
        "of them in double talk | detect p50 / p95 ms | "
        "playback stopped p50 ms | voice held p50 / p95 ms | holds without the user (pause p50 ms) | holds released | "
        "ERLE dB recordings / live | history = played | felt p50 ms | echo delay p50 ms | "
        "echo over voice, measured dB |",
        "|---|---|" + "---:|" * 16,
    ]
    for mode, row in by_mode.items():
        lines.append(table_row(mode, "all", row))
        for level, sub in row["by_echo_db"].items():
            lines.append(table_row(mode, f"{float(level):+g} dB", sub))
    lines += ["", "| mode | delay ms | echo | # | kind | question | interrupt at s | over echo | detected ms | "
              "stopped ms | false | history | words played | echo delay ms (range) | echo/voice dB |",
              "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|"]
    for sample in result.samples:
        d = sample.detail
        check = d["history_check"]
        history = "–" if check is None else (f"{'=' if check['matches'] else '≠'} {check['history_words']} vs "
                                             f"{check['played_words']} words")
        at = d["interrupt_after_s"]
        lines.append(f"| {sample.variant} | {d['delay_ms']:g} | {d['echo_db']:+g} | {sample.run + 1} | "
                     f"{d['kind'].replace('_', ' ')} | "
                     f"{d['question']} | {'–' if at is None else f'{at:.2f}'} | {_share(d.get('talk_over'))} | "
                     f"{_ms(sample.metrics['barge_in_detect_ms'])} | {_ms(sample.metrics['playback_stopped_ms'])} | "
                     f"{d['false_barge_ins']} | {history} | {(d['played_words'] or '–')[:80]} | "
                     f"{_ms(d['echo_delay_ms'])}{_range(d.get('echo_delay_range_ms'))} | "
                     f"{_db(d['echo_to_voice_db'])} |")
    lines += ["", *[f"- {note}" for note in result.notes], ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    """None: the figures are counts and a few percentiles, which the table says exactly."""
    return []


def parse_plan(args: argparse.Namespace) -> Plan:
    if args.turns < 1:
        raise UserError("--turns must be at least 1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise UserError(f"--modes takes a comma list of {', '.join(MODES)}, not {args.modes!r}")
    return Plan(tuple(dict.fromkeys(modes)), tuple(parse_numbers(args.echo_gains, "--echo-gains", -30, 20)),
                tuple(parse_numbers(args.delay_ms, "--delay-ms", 0, 500)), args.turns, args.seed,
                Path(args.keep_audio) if args.keep_audio else None, Path(args.app_log) if args.app_log else None)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    plan = parse_plan(args)
    run_bench(_bench(args, config, plan), Path(args.out), render_markdown, charts, (BenchError, EndpointStartError))
    return 0
