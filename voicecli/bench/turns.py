"""`voicecli bench turns`: spoken questions into a virtual microphone, the real app answering, latency as heard.

What it measures: the felt latency of a spoken turn, from the last voiced sample of the question to the first
audible sample of the answer, taken from the audio itself, next to the app's own timeline marks. The app is the
real one, as a user runs it: `python -m voicecli chat --no-tui --mode MODE` (the TUI's code path without the
screen), with the real local STT, LLM and TTS endpoint, its microphone and speaker being the virtual devices of a
private PulseAudio daemon (voicecli.bench.virtual_audio).

How both ends get onto one clock. Two recorders (parec) run on the same daemon for the whole run: one on the
virtual microphone `vmic` (exactly what the app hears), one on the virtual speaker's monitor (exactly what the app
played, where a loudspeaker would take it). Each recorder maps a captured frame to time.monotonic() from the
arrival times of its reads (Recorder.time_of_frame, error ~10 ms, the same kind of error at both ends, so it
mostly cancels in the difference). The question's end is found in the microphone recording, not assumed from when
paplay was started: paplay's start-up, PulseAudio's buffering and a null sink that runs slow for a moment all
shift when the app really hears the question, and measuring both ends in recordings of the same daemon is the
honest way to include none of that in the app's latency. The WAV file's own last voiced sample is kept alongside
(`question_voiced_s_file` vs `question_voiced_s_heard`): when the two disagree the sink did not run at real time.

Sound is a 10 ms window above -40 dBFS, refined to the sample (voicecli.bench.audio_marks). A premature answer is
a question that the app split into more than one turn (more than one spoken `turn_started` line for one
played question), or whose answer was audible before the question's last voiced sample. Between questions the bench
waits until the app has printed the turn's timeline and the speaker has been quiet for a second, so turns never
overlap; lines the app prints before the next question starts still belong to this one (a split second half).
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from voicecli.audio.echo_cancel import ECHO_MODES
from voicecli.bench import TURNS
from voicecli.bench.audio_marks import AUDIBLE_DBFS, QuietWatch, first_audible, sound_span
from voicecli.bench.charts import waterfall_chart
from voicecli.bench.machine import finish_machine_info, machine_info
from voicecli.bench.progress import BenchProgress
from voicecli.bench.questions import Question, voiced_questions
from voicecli.bench.report import (
    BenchResult,
    Metric,
    Sample,
    default_name,
    machine_line,
    run_bench,
    summarize_samples,
)
from voicecli.bench.scoring import score
from voicecli.bench.target import BenchError, Target, endpoint_stats, resolve_target
from voicecli.bench.virtual_audio import MIC_SOURCE, SPEAKER_MONITOR, PrivatePulse, PulseUnavailable, Recorder
from voicecli.config import Config
from voicecli.converse.session import llm_label
from voicecli.converse.timeline import Percentiles, summarize
from voicecli.converse.turn_lines import read_line
from voicecli.errors import UserError

MODES: tuple[str, ...] = ("bidi", "batch")
BASELINE = "batch"
STAGES: tuple[str, ...] = ("transcript_ready", "llm_first_token", "first_sentence_ready", "tts_first_request_sent",
                           "first_audio_byte", "first_audio_played")
"""The timeline marks of the waterfall: each turn's path from speech end to its first sample handed to PortAudio."""
MARKS: tuple[str, ...] = (*STAGES, "turn_confirmed", "llm_done", "turn_done")
"""Every timeline mark a sample keeps; turn_confirmed - speech_end is the end-of-turn wait (how long the app took to
decide the user had finished: the silence rule, the draft's verdict, a premature split shows as a short one)."""
FELT = Metric("felt_latency_ms", "felt latency")
MARK_METRICS = tuple(Metric(f"mark_{m}", m) for m in MARKS)
RECORD_RATE = 16_000
"""Both recorders: 62.5 µs per frame is far finer than the ~10 ms clock error, and memory stays small."""
STARTUP_TIMEOUT_S = 300.0
"""Loading Whisper, the LLM and connecting the endpoint on a busy 2-core machine."""
TURN_TIMEOUT_S = 300.0
"""From playing a question to its answer having played out (batch synthesizes the whole answer first)."""
QUIET_S = 1.0
"""Speaker silence that says an answer has finished playing (longer than any pause between its sentences)."""
SETTLE_S = 1.0
"""No new line from the app for this long after its timeline: a split question's second turn would have begun."""
GAP_S = 0.8
"""Silence between the end of one answer and the next question, like a user about to speak again."""
MISS_S = 30.0
"""A question the app has not taken as a turn this long after it was played is counted as missed."""


class AppExited(BenchError):
    """The app under test stopped before the bench was done with it."""


@dataclass(frozen=True)
class Variant:
    """What one app session runs: a mode (bidi, batch) and, when the bench compares them, an audio.echo."""

    mode: str
    echo: str | None = None

    @property
    def name(self) -> str:
        """The variant's name in results: the mode, or mode+echo ("bidi+aec")."""
        return self.mode if self.echo is None else f"{self.mode}+{self.echo}"


@dataclass(frozen=True)
class Session:
    """One app session of the schedule: a variant asking questions[first:first + count] (cycling)."""

    variant: Variant
    first: int
    count: int


def plan_sessions(variants: Sequence[Variant], turns: int, rounds: int) -> list[Session]:
    """The app sessions of a run: `turns` questions per variant in `rounds` rounds, the variants' order reversed
    every other round (A B, B A, A B...). Why rounds: the machine's speed drifts over a run (other work, CPU steal),
    and variants run one after the other absorb that drift as a difference between them; alternated, both see it.
    Each round asks the next slice of the questions, the same slice of every variant."""
    sessions: list[Session] = []
    first = 0
    for r in range(rounds):
        count = turns // rounds + (1 if r < turns % rounds else 0)
        if count == 0:
            continue
        order = variants if r % 2 == 0 else list(reversed(variants))
        sessions += [Session(v, first, count) for v in order]
        first += count
    return sessions


@dataclass
class Observation:
    """One played question and everything seen of it: the app's lines and the audio marks (monotonic seconds)."""

    mode: str
    turn: int
    question: Question
    played_at: float
    transcripts: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    timelines: list[dict[str, Any]] = field(default_factory=list)
    question_start: float | None = None
    question_end: float | None = None
    """The last voiced sample of the question as the microphone heard it."""
    answer_start: float | None = None
    """The first audible sample on the speaker after the question began."""
    last_line_at: float = 0.0

    @property
    def felt_ms(self) -> float | None:
        if self.question_end is None or self.answer_start is None:
            return None
        return (self.answer_start - self.question_end) * 1000

    def premature(self) -> list[str]:
        """Why this question counts as answered prematurely (empty: it did not)."""
        reasons: list[str] = []
        if max(len(self.transcripts), len(self.timelines)) > 1:
            reasons.append(f"split into {max(len(self.transcripts), len(self.timelines))} turns: "
                           + " | ".join(self.transcripts))
        felt = self.felt_ms
        if felt is not None and felt < 0:
            reasons.append(f"answer audible {-felt:.0f} ms before the question ended")
        return reasons

    @property
    def underruns(self) -> int:
        """Times the app's speaker ran dry inside this question's answers (timeline "underruns")."""
        return sum(int(t.get("underruns", 0)) for t in self.timelines)

    def speculations(self, key: str) -> int:
        """Sum over this question's turns of the timeline's speculations.<key> (0 where the app has none)."""
        return sum(int((t.get("speculations") or {}).get(key, 0)) for t in self.timelines)

    def settled(self, now: float, speaker_quiet: bool) -> bool:
        """The answer has played and nothing more is coming: timelines for every turn begun, a quiet speaker; or
        the app never took the question as a turn (missed) and MISS_S have passed."""
        if not speaker_quiet:
            return False
        if not self.transcripts:
            return now - self.last_line_at >= MISS_S
        return len(self.timelines) >= len(self.transcripts) and now - self.last_line_at >= SETTLE_S

    def take(self, line: str, at: float) -> None:
        """Attribute one stdout line of the app to this question."""
        self.last_line_at = at
        turn = read_line(line)
        if turn is None:
            return
        if turn.event == "turn_started" and turn.origin == "spoken":
            self.transcripts.append(turn.text.strip())
        elif turn.event == "turn_finished":
            self.answers.append(turn.text)
            self.timelines.append(turn.timeline)

    def sample(self) -> Sample:
        marks: dict[str, float] = self.timelines[0].get("marks_ms", {}) if self.timelines else {}
        metrics: dict[str, float | None] = {FELT.key: self.felt_ms}
        metrics.update({f"mark_{m}": marks.get(m) for m in MARKS})
        heard = (None if self.question_start is None or self.question_end is None
                 else round(self.question_end - self.question_start, 3))
        scored = score(self.question.text, self.question.answers, self.transcripts, self.answers)
        return Sample(self.mode, 0.0, self.turn, metrics, {
            "question": self.question.name,
            "question_text": self.question.text,
            "accepted_answers": list(self.question.answers),
            "word_errors": scored.word_errors,
            "reference_words": scored.reference_words,
            "answer_right": scored.answer_right,
            "question_pauses_ms": [round(p) for p in self.question.pauses_ms],
            "voicing": self.question.voicing,
            "question_voiced_s_file": round(self.question.voiced_end_s - self.question.voiced_start_s, 3),
            "question_voiced_s_heard": heard,
            "missed": not self.transcripts,
            "transcripts": self.transcripts,
            "answers": self.answers,
            "premature": self.premature(),
            "speculations": {k: self.speculations(k) for k in ("started", "confirmed", "cancelled")},
            "underruns": self.underruns,
            "timelines": self.timelines,
        })


class App:
    """The app under test as a child process: stdout lines queued with their arrival time, stderr kept for errors."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self._listening = threading.Event()
        self.process = subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1)
        assert self.process.stdout is not None and self.process.stderr is not None
        self._threads = [threading.Thread(target=self._read_stdout, args=(self.process.stdout,), daemon=True),
                         threading.Thread(target=self._read_stderr, args=(self.process.stderr,), daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put((time.monotonic(), line.rstrip("\n")))

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            self.stderr_tail.append(line.rstrip())
            if "listening on" in line:
                self._listening.set()

    def error(self, what: str) -> AppExited:
        tail = "\n".join(self.stderr_tail)
        return AppExited(f"{what}; `{' '.join(self.command[1:])}` said:\n{tail}")

    def wait_listening(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._listening.wait(0.2):
            if self.process.poll() is not None:
                raise self.error(f"the app exited (rc {self.process.returncode}) before it listened")
            if time.monotonic() > deadline:
                raise self.error(f"the app was not listening after {timeout_s:.0f} s")

    def pump(self, take: Callable[[str, float], None] | None, done: Callable[[float], bool], timeout_s: float,
             what: str, tick: Callable[[float], object] | None = None) -> None:
        """Hand the app's stdout lines to `take` until `done(now)`, calling `tick(now)` before it every round (a
        bench's own watch: the speaker's quiet, an answer running away); AppExited when the app dies, BenchError
        when nothing settles within `timeout_s` (`what`: where, for the message)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                at, line = self.lines.get(timeout=0.02)
                if take is not None:
                    take(line, at)
            except queue.Empty:
                pass
            now = time.monotonic()
            if tick is not None:
                tick(now)
            if done(now):
                return
            if self.process.poll() is not None and self.lines.empty():
                raise self.error(f"the app exited (rc {self.process.returncode}) {what}")
            if now > deadline:
                raise BenchError(f"nothing settled in {timeout_s:.0f} s {what}: "
                                 + ("; ".join(self.stderr_tail) or "the app said nothing"))

    def stop(self) -> None:
        """SIGINT, as a user's Ctrl-C (the session closes cleanly), then harder if it does not exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for thread in self._threads:
            thread.join(timeout=5)


def app_command(config: Config, target: Target, mode: str, config_path: Path | None) -> list[str]:
    """The app as a user starts it, with this bench's effective endpoint, LLM and models (so both agree)."""
    command = [sys.executable, "-m", "voicecli", "--endpoint", target.url, "--llm", config.llm.backend,
               "--models-dir", str(config.models_dir)]
    if config_path is not None:
        command += ["--config", str(config_path)]
    return [*command, "chat", "--no-tui", "--mode", mode]


class TurnRunner:
    """One mode: start the app, play each question, wait for its answer to play out, and mark both in audio."""

    def __init__(self, pulse: PrivatePulse, app: App, mode: str, bar: BenchProgress | None) -> None:
        self.pulse = pulse
        self.app = app
        self.mode = mode
        self.bar = bar
        self.mic: Recorder | None = None
        self.speaker: Recorder | None = None
        self.quiet: QuietWatch | None = None

    def __enter__(self) -> TurnRunner:
        self.mic = self.pulse.record(MIC_SOURCE, rate=RECORD_RATE)
        self.speaker = self.pulse.record(SPEAKER_MONITOR, rate=RECORD_RATE)
        self.quiet = QuietWatch(self.speaker, QUIET_S, time.monotonic())
        return self

    def __exit__(self, *exc: object) -> None:
        for recorder in (self.mic, self.speaker):
            if recorder is not None:
                recorder.stop()

    @property
    def quiet_since(self) -> float:
        """When the speaker last had sound (QuietWatch)."""
        assert self.quiet is not None
        return self.quiet.since

    def _speaker_quiet(self, now: float) -> bool:
        assert self.quiet is not None
        return self.quiet.quiet(now)

    def _pump(self, current: Observation | None, done: Callable[[float], bool], what: str) -> None:
        """Hand the app's lines to `current` until `done(now)` (App.pump), the speaker's quiet kept current."""
        self.app.pump(None if current is None else current.take, done, TURN_TIMEOUT_S, f"({self.mode}) {what}",
                      self._speaker_quiet)

    def ask(self, question: Question, turn: int, previous: Observation | None) -> Observation:
        """Play one question once the previous answer is over, and collect this question's lines."""
        assert self.mic is not None and self.speaker is not None
        start = time.monotonic()
        self._pump(previous, lambda now: now - max(start, self.quiet_since) >= GAP_S, "before the next question")
        current = Observation(self.mode, turn, question, time.monotonic())
        self.pulse.play_into_mic(question.path)
        current.last_line_at = time.monotonic()
        self._pump(current, lambda now: current.settled(now, self._speaker_quiet(now)),
                   f"after question {question.name}")
        return current

    def mark(self, observation: Observation, until: float) -> None:
        """The audio marks of one question: its voiced span on the microphone, the answer's onset on the speaker."""
        assert self.mic is not None and self.speaker is not None
        start = max(0, int(self.mic.frame_at(observation.played_at - 0.05)))
        heard = self.mic.samples(start, int(self.mic.frame_at(until)))
        span = sound_span(heard, RECORD_RATE)
        if span is None:
            return
        observation.question_start = self.mic.time_of_frame(start + span[0])
        observation.question_end = self.mic.time_of_frame(start + span[1])
        begin = max(0, int(self.speaker.frame_at(observation.question_start)))
        answer = first_audible(self.speaker.samples(begin, int(self.speaker.frame_at(until))), RECORD_RATE)
        if answer is not None:
            observation.answer_start = self.speaker.time_of_frame(begin + answer)

    def run(self, questions: list[Question], turns: int, first: int = 0) -> list[Observation]:
        """Ask questions[first:first + turns] (cycling through the set), numbered from `first`."""
        observations: list[Observation] = []
        previous: Observation | None = None
        for turn in range(first, first + turns):
            question = questions[turn % len(questions)]
            if self.bar is not None:
                self.bar.describe(f"{self.mode}, question {turn + 1} ({question.name})")
            current = self.ask(question, turn, previous)
            if previous is not None:
                self.mark(previous, current.played_at)
            observations.append(current)
            previous = current
            if self.bar is not None:
                self.bar.step()
        if previous is not None:  # a late second turn of the last question would start within the gap
            end = time.monotonic()
            self._pump(previous, lambda now: now - max(end, self.quiet_since) >= GAP_S + SETTLE_S,
                       "after the last question")
            self.mark(previous, time.monotonic())
        return observations


def run_session(pulse: PrivatePulse, command: list[str], session: Session, questions: list[Question], work: Path,
                bar: BenchProgress | None) -> list[Observation]:
    """Start the app as `session` runs it (its mode in `command`, its audio.echo in the environment), ask its
    questions, stop it."""
    env = {**pulse.child_env(), "XDG_STATE_HOME": str(work / "state"), "PYTHONUNBUFFERED": "1"}
    if session.variant.echo is not None:
        env["VOICECLI_AUDIO__ECHO"] = session.variant.echo
    name = session.variant.name
    if bar is not None:
        bar.describe(f"{name}: starting the app (Whisper, LLM, endpoint connection)")
    app = App(command, env)
    try:
        app.wait_listening(STARTUP_TIMEOUT_S)
        with TurnRunner(pulse, app, name, bar) as runner:
            return runner.run(questions, session.count, session.first)
    finally:
        app.stop()


def summary_by_mode(samples: list[Sample], modes: list[str]) -> dict[str, dict[str, Any]]:
    """Per mode: the headline figures the README quotes, and the median of every timeline mark."""
    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        mine = [s for s in samples if s.variant == mode]
        felt = summarize(v for s in mine if (v := s.metrics.get(FELT.key)) is not None)
        wait = summarize(v for s in mine if (v := s.metrics.get("mark_turn_confirmed")) is not None)
        held, after = audio_against_verdict(mine)
        marks: dict[str, float] = {}
        for mark in MARKS:
            pct = summarize(v for s in mine if (v := s.metrics.get(f"mark_{mark}")) is not None)
            if pct is not None:
                marks[mark] = round(pct.p50, 1)
        out[mode] = {
            "turns": len(mine),
            "answered": felt.count if felt else 0,
            "felt_latency_p50_ms": None if felt is None else round(felt.p50, 1),
            "felt_latency_p95_ms": None if felt is None else round(felt.p95, 1),
            "end_of_turn_wait_p50_ms": None if wait is None else round(wait.p50, 1),
            "end_of_turn_wait_p95_ms": None if wait is None else round(wait.p95, 1),
            "answers_held_for_end_of_turn": held,
            "first_audio_byte_after_end_of_turn_p50_ms": None if after is None else round(after.p50, 1),
            "premature_answers": sum(1 for s in mine if s.detail["premature"]),
            "missed_questions": sum(1 for s in mine if s.detail["missed"]),
            "speculations_started": sum(s.detail["speculations"]["started"] for s in mine),
            "speculations_confirmed": sum(s.detail["speculations"]["confirmed"] for s in mine),
            "speculations_cancelled": sum(s.detail["speculations"]["cancelled"] for s in mine),
            "underruns": sum(int(s.detail.get("underruns", 0)) for s in mine),
            "answers_with_underruns": sum(1 for s in mine if s.detail.get("underruns", 0)),
            "timeline_marks_p50_ms": marks,
            **_scores(mine),
        }
    return out


def audio_against_verdict(samples: Sequence[Sample]) -> tuple[int | None, Percentiles | None]:
    """Whether the end of turn or the answer's own making decides when it is heard: the answers whose first audio
    byte was in before the turn was confirmed (ready, held for the verdict: a shorter end-of-turn wait would have
    played them sooner), and how long after the verdict the first audio byte came (p50 over all answers; > 0: the
    STT -> LLM -> TTS chain, started on the draft at the pause, was still running when the turn was confirmed, and a
    shorter wait would not have moved the answer). (None, None) when no answer has both marks."""
    held = 0
    after: list[float] = []
    for sample in samples:
        byte, confirmed = sample.metrics.get("mark_first_audio_byte"), sample.metrics.get("mark_turn_confirmed")
        if byte is None or confirmed is None:
            continue
        held += byte <= confirmed
        after.append(byte - confirmed)
    return (held if after else None), summarize(after)


def _scores(samples: list[Sample]) -> dict[str, Any]:
    """What was understood and answered right, over the questions whose text (and answers) are known: the
    transcript's word error rate (errors over reference words, pooled), and answers right of those scored."""
    heard = [s.detail for s in samples if s.detail.get("reference_words")]
    scored = [s.detail["answer_right"] for s in samples if s.detail.get("answer_right") is not None]
    reference = sum(d["reference_words"] for d in heard)
    return {
        "transcript_wer": round(sum(d["word_errors"] for d in heard) / reference, 4) if reference else None,
        "answers_right": sum(1 for right in scored if right),
        "answers_scored": len(scored),
    }


def _held(row: dict[str, Any]) -> str:
    held = row.get("answers_held_for_end_of_turn")
    return "–" if held is None else f"{held} / {row['answered']}"


def voiced_by(voicing: dict[str, Any]) -> str:
    """A built-in question's voicing in a few words ("am_michael 1.15x, noise 20 dB"); "–" for a user's file."""
    if not voicing:
        return "–"
    noise = f", noise {voicing['noise_snr_db']:g} dB" if voicing.get("noise_snr_db") is not None else ""
    return f"{voicing['voice']} {voicing['speed']:g}x{noise}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def render_markdown(result: BenchResult) -> str:
    settings = result.settings
    by_mode: dict[str, dict[str, Any]] = result.extra["summary_by_mode"]
    lines = [
        f"# voicecli bench turns: {result.name}",
        "",
        f"Measured {result.created} on {machine_line(result.machine)}.",
        f"LLM: {settings['llm']}; STT {settings['stt_model']}; {settings['turns']} spoken questions per mode "
        f"({settings['questions']}); voice {settings['voice']}; audio.echo {settings.get('echo', '?')}.",
        "",
        "**Felt latency**: the question's last voiced sample on the virtual microphone to the answer's first audible "
        "sample on the virtual speaker (ms, from the recordings). An answer with a gap: the app's speaker ran dry "
        "while the answer was still coming (its audio arrived late).",
        "",
        "| mode | questions | answered | felt p50 | felt p95 | end-of-turn wait p50 / p95 | "
        "answers held for the end of turn | first audio byte after it, p50 | premature | "
        "speculations cancelled | answers with a gap | transcript WER | answers right | "
        + " | ".join(f"{m} p50" for m in STAGES) + " |",
        "|---|" + "---:|" * (12 + len(STAGES)),
    ]
    for mode, row in by_mode.items():
        marks = row["timeline_marks_p50_ms"]
        wer = row.get("transcript_wer")
        right = f"{row['answers_right']} / {row['answers_scored']}" if row.get("answers_scored") else "–"
        lines.append(f"| {mode} | {row['turns']} | {row['answered']} | {_ms(row['felt_latency_p50_ms'])} | "
                     f"{_ms(row['felt_latency_p95_ms'])} | {_ms(row.get('end_of_turn_wait_p50_ms'))} / "
                     f"{_ms(row.get('end_of_turn_wait_p95_ms'))} | {_held(row)} | "
                     f"{_ms(row.get('first_audio_byte_after_end_of_turn_p50_ms'))} | {row['premature_answers']} | "
                     f"{row['speculations_cancelled']} | {row.get('answers_with_underruns', '–')} | "
                     f"{'–' if wer is None else f'{wer:.1%}'} | {right} | "
                     + " | ".join(_ms(marks.get(m)) for m in STAGES) + " |")
    lines += ["", "Timeline marks are the app's own (ms after its detected speech end, medians); the end-of-turn wait "
              "is turn_confirmed, when the app decided the user had finished. An answer held for the end of turn had "
              "its first audio byte in before that decision (a shorter wait would have played it sooner); after it, "
              "the answer started on the draft at the pause was still being made, and the STT -> LLM -> TTS chain, "
              "not the wait, decided when it was heard. Transcript WER: word "
              "errors over the questions' words, after case, punctuation and number words are normalised; an answer is "
              "right when it holds one of the question's accepted answers (voicecli/bench/scoring.py).", "",
              "| mode | # | question | voiced by | heard as | word errors | answer | right | felt ms | "
              "first_audio_played ms | premature |",
              "|---|---:|---|---|---|---:|---|---|---:|---:|---|"]
    for sample in result.samples:
        detail = sample.detail
        right = {True: "yes", False: "no", None: "–"}[detail.get("answer_right")]
        errors = detail.get("word_errors")
        answer = " / ".join(detail["answers"]).replace("|", "/").replace("\n", " ")
        lines.append(f"| {sample.variant} | {sample.run + 1} | {detail['question_text'] or detail['question']} | "
                     f"{voiced_by(detail.get('voicing') or {})} | {' / '.join(detail['transcripts']) or '(nothing)'} | "
                     f"{'–' if errors is None else errors} | "
                     f"{answer[:120] or '(none)'} | {right} | {_ms(sample.metrics[FELT.key])} | "
                     f"{_ms(sample.metrics['mark_first_audio_played'])} | {'; '.join(detail['premature']) or 'no'} |")
    lines += ["", *[f"- {note}" for note in result.notes], "", "![turn waterfall](turn_waterfall.png)", ""]
    return "\n".join(lines)


def charts(result: BenchResult, directory: Path) -> list[Path]:
    by_mode: dict[str, dict[str, Any]] = result.extra["summary_by_mode"]
    return [waterfall_chart(by_mode, STAGES, directory / "turn_waterfall.png")]


def baseline(variants: Sequence[Variant]) -> str:
    """The variant the summary's ratios are to: batch, or with echo variants the last one asked of the first mode
    (`--echo aec,gate`: aec over gate)."""
    echoes = [v for v in variants if v.echo is not None]
    return BASELINE if not echoes else [v for v in echoes if v.mode == echoes[0].mode][-1].name


def build_result(name: str, samples: list[Sample], config: Config, variants: list[Variant], turns: int,
                 questions: list[Question], source: str, machine: dict[str, Any], target: Target,
                 rounds: int = 1) -> BenchResult:
    modes = [v.name for v in variants]
    echoes = [v.echo for v in variants if v.echo is not None]
    result = BenchResult(
        kind="turns", name=name,
        settings={"turns": turns, "modes": modes, "rounds": rounds, "questions": source,
                  "question_set": [q.describe() for q in questions], "llm": llm_label(config),
                  "llm_backend": config.llm.backend, "stt_model": config.stt.model,
                  "voice": config.tts.voice, "endpoint": target.url,
                  "vad_silence_ms": config.audio.vad_silence_ms,
                  "echo": ",".join(dict.fromkeys(echoes)) if echoes else config.audio.echo,
                  "audible_dbfs": AUDIBLE_DBFS, "record_rate": RECORD_RATE},
        machine=machine, samples=samples)
    result.summary = summarize_samples(samples, (FELT, *MARK_METRICS), modes, baseline(variants))
    result.extra["summary_by_mode"] = summary_by_mode(samples, modes)
    result.notes = [
        "The app is `voicecli chat --no-tui` (the TUI's pipeline without the screen) with real models; its "
        "microphone and speaker are the virtual devices of a private PulseAudio daemon.",
        "Felt latency is measured in two recordings of that daemon (the microphone, the speaker's monitor) on one "
        "clock; each end carries ~10 ms of recorder timing error.",
        "first_audio_played is the app's own mark (first sample handed to PortAudio); the felt latency also "
        "includes the app's speech-end detection and the output device's buffering.",
        "A premature answer: one question split into several turns, or answer audio before the question ended.",
        "Modes run one after the other (each with a fresh app), not interleaved: compare them knowing the load "
        "may have changed between them (see the load averages)." if rounds == 1 else
        f"Modes alternate in {rounds} rounds (A B, B A, ...; each session a fresh app asking the round's slice of "
        "the questions), so a machine whose speed drifts over the run slows both alike.",
    ]
    return result


async def _bench(args: argparse.Namespace, config: Config, variants: list[Variant]) -> BenchResult:
    with tempfile.TemporaryDirectory(prefix="voicecli-turns-") as tmp, \
            BenchProgress(None, "bench turns") as bar:
        work = Path(tmp)
        target = await resolve_target(config, bar.note)
        try:
            bar.describe("preparing questions")
            questions, source = await voiced_questions(args, work / "questions", config, bar.describe, target.url,
                                                       limit=args.turns)
            turns = args.turns or (TURNS if (args.question_set or args.default_set) == "latency" and
                                   args.questions is None else len(questions))
            bar.set_total(turns * len(variants))
            stats = await endpoint_stats(target)
            machine = machine_info(stats)
            samples: list[Sample] = []
            try:
                with PrivatePulse() as pulse:
                    for session in plan_sessions(variants, turns, args.rounds):
                        command = app_command(config, target, session.variant.mode, getattr(args, "config", None))
                        observations = await asyncio.to_thread(run_session, pulse, command, session, questions,
                                                               work, bar)
                        samples += [o.sample() for o in observations]
            except PulseUnavailable as exc:
                raise BenchError(f"bench turns needs a PulseAudio daemon of its own: {exc}") from exc
            finish_machine_info(machine)
        finally:
            target.close()
    order = {v.name: i for i, v in enumerate(variants)}
    samples.sort(key=lambda s: (order[s.variant], s.run))  # each variant's turns together, whatever the rounds
    return build_result(args.name or default_name("turns"), samples, config, variants, turns, questions, source,
                        machine, target, args.rounds)


def run(args: argparse.Namespace, config: Config) -> int:
    from voicecli.tts.local_endpoint import EndpointStartError

    if args.turns is not None and args.turns < 1:
        raise UserError("--turns must be at least 1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if not modes or unknown:
        raise UserError(f"--modes takes a comma list of {', '.join(MODES)}, not {args.modes!r}")
    echoes = [e.strip() for e in (args.echo or "").split(",") if e.strip()]
    if any(e not in ECHO_MODES for e in echoes):
        raise UserError(f"--echo takes a comma list of {', '.join(ECHO_MODES)}, not {args.echo!r}")
    if args.rounds < 1:
        raise UserError("--rounds must be at least 1")
    variants = [Variant(m, e) for m in modes for e in echoes] if echoes else [Variant(m) for m in modes]
    run_bench(_bench(args, config, variants), Path(args.out), render_markdown, charts,
              (BenchError, EndpointStartError))
    return 0
