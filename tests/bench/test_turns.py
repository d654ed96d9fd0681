"""`voicecli bench turns`: what counts as a premature answer, how the app's lines are attributed to a question, the
per-mode summary, and (slow) the whole bench end to end on the real models with its own private PulseAudio."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.bench.test_bench import bench, outputs
from tests.conftest import RunningServer
from voicecli.bench.questions import Question
from voicecli.bench.report import BenchResult
from voicecli.bench.turns import (
    MISS_S,
    SETTLE_S,
    STAGES,
    Observation,
    Session,
    Variant,
    baseline,
    charts,
    plan_sessions,
    render_markdown,
    summary_by_mode,
)
from voicecli.cli import main
from voicecli.converse.timeline import TurnTimeline
from voicecli.converse.turn_lines import TurnLine

QUESTION = Question("q01", "What is the capital of France?", Path("q01.wav"), 22_050, 2.6, 0.3, 2.3, ())


def timeline_line(speech_end: float, marks: dict[str, float], speculations: dict[str, int] | None = None,
                  underruns: int = 0) -> str:
    """A turn_finished line exactly as `voicecli chat --no-tui` prints it, from a real TurnTimeline."""
    timeline = TurnTimeline(1, "bidi", "spoken")
    timeline.underruns = underruns
    timeline.mark("speech_end", speech_end)
    for name, at in marks.items():
        timeline.mark(name, speech_end + at / 1000)
    data: dict[str, Any] = timeline.to_json()
    if speculations is not None:
        data["speculations"] = speculations
    return TurnLine("turn_finished", 1, "Paris.", timeline=data).encode()


def started_line(text: str) -> str:
    return TurnLine("turn_started", 1, text, origin="spoken").encode()


def observed(transcripts: list[str], question_end: float = 10.0, answer_start: float | None = 11.2,
             speculations: dict[str, int] | None = None, underruns: int = 0) -> Observation:
    obs = Observation("bidi", 0, QUESTION, played_at=7.0)
    for index, text in enumerate(transcripts):
        obs.take(started_line(text), 12.0 + index)
        obs.take("a line that is not JSON is ignored", 12.5 + index)
        obs.take(timeline_line(10.0, {"transcript_ready": 700.0, "turn_confirmed": 650.0 + 100 * index,
                                      "first_audio_played": 1100.0}, speculations, underruns), 13.0 + index)
    obs.question_start, obs.question_end, obs.answer_start = 8.0, question_end, answer_start
    return obs


def test_one_turn_answered_after_the_question_is_not_premature() -> None:
    obs = observed(["What is the capital of France?"])
    assert obs.felt_ms == pytest.approx(1200.0)
    assert obs.premature() == []
    sample = obs.sample()
    assert sample.metrics["felt_latency_ms"] == pytest.approx(1200.0)
    assert sample.metrics["mark_transcript_ready"] == 700.0 and sample.metrics["mark_first_audio_played"] == 1100.0
    assert sample.metrics["mark_llm_first_token"] is None  # not reached: None, not 0
    assert sample.detail["answers"] == ["Paris."] and sample.detail["missed"] is False


def test_a_question_split_into_two_turns_is_premature() -> None:
    (reason,) = observed(["What is the capital of", "France?"]).premature()
    assert reason.startswith("split into 2 turns") and "What is the capital of | France?" in reason


def test_answer_audio_before_the_question_ended_is_premature() -> None:
    (reason,) = observed(["What is the capital of France?"], question_end=10.0, answer_start=9.7).premature()
    assert reason == "answer audible 300 ms before the question ended"


def test_no_answer_heard_has_no_felt_latency_and_is_not_called_premature() -> None:
    obs = observed(["What is the capital of France?"], answer_start=None)
    assert obs.felt_ms is None and obs.premature() == []


def test_speculation_counts_are_summed_and_missing_ones_are_zero() -> None:
    assert observed(["a"]).speculations("cancelled") == 0  # today's app has no speculations key
    obs = observed(["a", "b"], speculations={"started": 2, "confirmed": 1, "cancelled": 1})
    assert (obs.speculations("started"), obs.speculations("confirmed"), obs.speculations("cancelled")) == (4, 2, 2)


def test_a_turn_settles_only_when_every_begun_turn_has_its_timeline_and_the_speaker_is_quiet() -> None:
    obs = Observation("bidi", 0, QUESTION, played_at=0.0)
    obs.last_line_at = 3.0
    assert not obs.settled(3.0 + MISS_S - 1, speaker_quiet=True)  # not taken as a turn yet
    assert obs.settled(3.0 + MISS_S, speaker_quiet=True)  # missed
    obs.take(started_line("What is"), 4.0)
    assert not obs.settled(100.0, speaker_quiet=True)  # its answer is still coming
    obs.take(timeline_line(3.5, {"first_audio_played": 1000.0}), 6.0)
    assert not obs.settled(6.0 + SETTLE_S, speaker_quiet=False)  # still playing
    assert not obs.settled(6.0 + SETTLE_S / 2, speaker_quiet=True)  # a second turn could still begin
    assert obs.settled(6.0 + SETTLE_S, speaker_quiet=True)
    obs.take(started_line("the capital of France?"), 6.5)  # a split: wait for its answer too
    assert not obs.settled(20.0, speaker_quiet=True)


def test_summary_by_mode_report_and_waterfall(tmp_path: Path) -> None:
    turns = [observed(["q"], answer_start=10.0 + felt / 1000, underruns=gaps)
             for felt, gaps in ((900.0, 0), (1100.0, 3), (1300.0, 0))]
    split = observed(["What is the capital of", "France?"], answer_start=11.0)
    missed = Observation("bidi", 4, QUESTION, played_at=0.0)
    samples = [o.sample() for o in (*turns, split, missed)]
    for run, sample in enumerate(samples):
        sample.run = run
    by_mode = summary_by_mode(samples, ["bidi", "batch"])
    bidi = by_mode["bidi"]
    assert bidi["turns"] == 5 and bidi["answered"] == 4 and bidi["missed_questions"] == 1
    assert bidi["felt_latency_p50_ms"] == pytest.approx(1050.0) and bidi["premature_answers"] == 1
    assert bidi["felt_latency_p95_ms"] == pytest.approx(1270.0)
    assert bidi["speculations_cancelled"] == 0
    assert bidi["underruns"] == 3 and bidi["answers_with_underruns"] == 1  # the speaker ran dry inside one answer
    assert bidi["timeline_marks_p50_ms"] == {"transcript_ready": 700.0, "turn_confirmed": 650.0,
                                             "first_audio_played": 1100.0}
    # the end-of-turn wait: each question's first turn confirmed 650 ms after speech end
    assert (bidi["end_of_turn_wait_p50_ms"], bidi["end_of_turn_wait_p95_ms"]) == (650.0, 650.0)
    assert by_mode["batch"]["turns"] == 0 and by_mode["batch"]["felt_latency_p50_ms"] is None
    # heard "q" three times (6 errors each), the split question right (0), the missed one not at all (6): 24 / 30
    assert bidi["transcript_wer"] == pytest.approx(0.8) and bidi["answers_scored"] == 0
    result = BenchResult("turns", "run", {"turns": 5, "llm": "local", "stt_model": "tiny.en", "questions": "built-in",
                                          "voice": "af_heart", "echo": "gate"}, {}, samples)
    result.extra["summary_by_mode"] = by_mode
    assert result.to_json()["summary_by_mode"]["bidi"]["premature_answers"] == 1
    markdown = render_markdown(result)
    assert "voice af_heart; audio.echo gate." in markdown
    assert "| bidi | 5 | 4 | 1,050 | 1,270 | 650 / 650 | – | – | 1 | 0 | 1 | 80.0% | – |" in markdown  # no byte marks
    assert "split into 2 turns" in markdown and "(nothing)" in markdown
    (chart,) = charts(result, tmp_path)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {*STAGES, "turn_confirmed"} >= set(bidi["timeline_marks_p50_ms"])


def test_answers_held_for_the_end_of_turn_are_told_from_answers_the_chain_made_late() -> None:
    """The first audio byte before turn_confirmed: ready and held for the verdict; after it: still being made."""
    samples = []
    for byte in (600.0, 900.0, 1000.0, 1100.0):
        obs = Observation("bidi", 0, QUESTION, played_at=7.0)
        obs.take(started_line("What is the capital of France?"), 12.0)
        obs.take(timeline_line(10.0, {"turn_confirmed": 680.0, "first_audio_byte": byte,
                                      "first_audio_played": byte + 90}), 13.0)
        obs.question_start, obs.question_end, obs.answer_start = 8.0, 10.0, 10.0 + (byte + 100) / 1000
        samples.append(obs.sample())
    bidi = summary_by_mode(samples, ["bidi"])["bidi"]
    assert bidi["answers_held_for_end_of_turn"] == 1
    assert bidi["first_audio_byte_after_end_of_turn_p50_ms"] == pytest.approx(270.0)  # 220, 320 around the middle
    result = BenchResult("turns", "run", {"turns": 4, "llm": "local", "stt_model": "tiny.en", "questions": "built-in",
                                          "voice": "af_heart", "echo": "aec"}, {}, samples)
    result.extra["summary_by_mode"] = summary_by_mode(samples, ["bidi"])
    assert "| 680 / 680 | 1 / 4 | 270 | 0 |" in render_markdown(result)


def test_questions_with_accepted_answers_are_scored_right_or_wrong() -> None:
    asked = replace(QUESTION, answers=("paris",))
    right = Observation("bidi", 0, asked, played_at=7.0)
    right.take(started_line("What is the capital of France?"), 12.0)
    right.take(timeline_line(10.0, {"first_audio_played": 900.0}), 13.0)  # answers "Paris."
    wrong = Observation("bidi", 1, replace(QUESTION, answers=("rome",)), played_at=7.0)
    wrong.take(started_line("What is the capital of France?"), 12.0)
    wrong.take(timeline_line(10.0, {"first_audio_played": 900.0}), 13.0)
    samples = [right.sample(), wrong.sample()]
    assert [s.detail["answer_right"] for s in samples] == [True, False]
    bidi = summary_by_mode(samples, ["bidi"])["bidi"]
    assert (bidi["answers_right"], bidi["answers_scored"], bidi["transcript_wer"]) == (1, 2, 0.0)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pulseaudio") is None or shutil.which("espeak-ng") is None,
                    reason="needs pulseaudio and espeak-ng")
def test_turns_bench_end_to_end(server: RunningServer, tmp_path: Path) -> None:
    """The first two questions of the quality set, voiced by two Kokoro voices through the endpoint (af_bella; then
    am_michael at 1.15x), through the real app in bidi mode."""
    result = bench(server, tmp_path, "turns", "--set", "quality", "--turns", "2", "--modes", "bidi",
                   env={"VOICECLI_LLM__BACKEND": "local", "VOICECLI_LLM__MAX_TOKENS": "32"})
    data, markdown = outputs(tmp_path, "turns", ["turn_waterfall.png"])
    assert data["settings"]["modes"] == ["bidi"] and data["settings"]["turns"] == 2
    assert set(data["summary_by_mode"]) == {"bidi"}
    bidi = data["summary_by_mode"]["bidi"]
    assert bidi["turns"] == 2 and bidi["answered"] == 2 and bidi["missed_questions"] == 0
    assert bidi["premature_answers"] == 0, [s["detail"]["premature"] for s in data["samples"]]
    for key in ("felt_latency_p50_ms", "felt_latency_p95_ms"):
        assert math.isfinite(bidi[key]) and bidi[key] > 0
    assert bidi["speculations_cancelled"] >= 0
    assert {"transcript_ready", "first_audio_played"} <= set(bidi["timeline_marks_p50_ms"])
    for sample in data["samples"]:
        detail = sample["detail"]
        assert len(detail["transcripts"]) == 1 and len(detail["timelines"]) == 1
        assert 0 < sample["metrics"]["felt_latency_ms"] < 60_000
        # the question as heard lasted as long as the file's voiced part: the virtual mic ran at real time
        assert detail["question_voiced_s_heard"] == pytest.approx(detail["question_voiced_s_file"], abs=0.1)
    assert "capital" in data["samples"][0]["detail"]["transcripts"][0].lower()
    assert bidi["answers_scored"] == 2 and bidi["transcript_wer"] is not None  # both quality questions are scored
    assert [q["voicing"]["voice"] for q in data["settings"]["question_set"]] == ["af_bella", "am_michael"]
    assert "built-in set 'quality'" in data["settings"]["questions"]
    assert "| bidi | 2 | 2 |" in markdown and "| bidi |" in result.stdout


def test_rounds_alternate_the_variants_over_consecutive_slices_of_the_questions() -> None:
    aec, gate = Variant("bidi", "aec"), Variant("bidi", "gate")
    assert [aec.name, gate.name, Variant("batch").name] == ["bidi+aec", "bidi+gate", "batch"]
    assert plan_sessions([aec, gate], 7, 3) == [
        Session(aec, 0, 3), Session(gate, 0, 3), Session(gate, 3, 2), Session(aec, 3, 2),
        Session(aec, 5, 2), Session(gate, 5, 2)]
    assert plan_sessions([aec, gate], 1, 2) == [Session(aec, 0, 1), Session(gate, 0, 1)]  # no empty round
    assert plan_sessions([Variant("bidi"), Variant("batch")], 4, 1) == [
        Session(Variant("bidi"), 0, 4), Session(Variant("batch"), 0, 4)]  # as before: one after the other
    assert baseline([Variant("bidi"), Variant("batch")]) == "batch"
    assert baseline([aec, gate, Variant("batch", "aec"), Variant("batch", "gate")]) == "bidi+gate"


@pytest.mark.parametrize(("args", "message"), [
    (["--modes", "bidi,nope"], "--modes takes a comma list of bidi, batch, not 'bidi,nope'"),
    (["--modes", ","], "--modes takes a comma list"),
    (["--turns", "0"], "--turns must be at least 1"),
    (["--echo", "aec,loud"], "--echo takes a comma list of aec, gate, off, not 'aec,loud'"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bad_options_stop_with_one_line_before_anything_starts(args: list[str], message: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "turns", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pulseaudio") is None or shutil.which("espeak-ng") is None,
                    reason="needs pulseaudio and espeak-ng")
def test_turns_bench_scores_a_question_folder_with_a_manifest(server: RunningServer, tmp_path: Path) -> None:
    """Two questions of a user's folder, each with its text and accepted answers in questions.json, through the
    real app: the results say what was heard, its word errors, and whether each answer was right. Asked of the app
    with the echo canceller and with the gate, in two rounds (aec, gate; gate, aec): one question per session."""
    folder = tmp_path / "questions"
    folder.mkdir()
    asked = {"a.wav": ("What is the capital of France?", ["paris"]), "b.wav": ("What color is the sky?", ["blue"])}
    for name, (text, _) in asked.items():
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", str(folder / name), text], check=True,
                       timeout=60)
    (folder / "questions.json").write_text(json.dumps({"questions": [
        {"file": name, "text": text, "answers": answers} for name, (text, answers) in asked.items()]}))
    bench(server, tmp_path / "out", "turns", "--turns", "2", "--modes", "bidi", "--questions", str(folder),
          "--echo", "aec,gate", "--rounds", "2",
          env={"VOICECLI_LLM__BACKEND": "local", "VOICECLI_LLM__MAX_TOKENS": "32"})
    data, markdown = outputs(tmp_path / "out", "turns", ["turn_waterfall.png"])
    assert data["settings"]["modes"] == ["bidi+aec", "bidi+gate"] and data["settings"]["rounds"] == 2
    assert [(s["variant"], s["detail"]["question"]) for s in data["samples"]] == [
        ("bidi+aec", "a.wav"), ("bidi+aec", "b.wav"), ("bidi+gate", "a.wav"), ("bidi+gate", "b.wav")]
    for bidi in data["summary_by_mode"].values():
        assert bidi["answers_scored"] == 2 and 0 <= bidi["answers_right"] <= 2
    assert sum(b["transcript_wer"] for b in data["summary_by_mode"].values()) <= 1.0, [
        s["detail"]["transcripts"] for s in data["samples"]]
    for sample in data["samples"]:
        detail = sample["detail"]
        assert detail["question_text"] == asked[detail["question"]][0]
        assert detail["accepted_answers"] == asked[detail["question"]][1]
        assert isinstance(detail["answer_right"], bool) and detail["word_errors"] >= 0
    assert "transcript WER" in markdown and "answers right" in markdown
