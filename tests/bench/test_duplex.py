"""`voicecli bench duplex`: which barge-ins are false, when a history equals the words played, the app's lines
attributed to a turn, the per-mode summary in the issue's schema, and (slow) one short real run of the harness:
the real app on the private PulseAudio with the echo path carrying its answers into its microphone."""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from tests.bench.test_bench import bench, outputs
from tests.conftest import RunningServer
from voicecli.audio.echo_dump import COLUMNS, EchoDump, load_dump
from voicecli.bench import duplex
from voicecli.bench.duplex import (
    DETECT_WINDOW_S,
    INTERRUPTION_TURN_S,
    DuplexTurn,
    Kind,
    Plan,
    Session,
    Timing,
    Voices,
    active_dbfs,
    check_history,
    kind_of,
    live_erle,
    live_output,
    load_session,
    mode_env,
    played_prefix,
    render_markdown,
    replay_erle,
    save_session,
    sort_barge_ins,
    span_erle,
    stop_window,
    summary_by_mode,
)
from voicecli.bench.echo_path import EchoRouter
from voicecli.bench.questions import Question
from voicecli.bench.report import BenchResult
from voicecli.bench.virtual_audio import PrivatePulse
from voicecli.cli import main
from voicecli.config import Config
from voicecli.converse.turn_lines import TurnLine

QUESTION = Question("q00", "Tell me about the ocean.", Path("q00.wav"), 16_000, 2.0, 0.3, 1.7, ())
ANSWER = "The ocean is a vast and mysterious realm that surrounds our planet. It is full of life."
SUMMARY_KEYS = {"answers", "echo_only_answers", "false_barge_ins", "barge_ins", "barge_ins_detected",
                "barge_in_detect_p50_ms", "barge_in_detect_p95_ms", "erle_db", "history_matches"}


def test_active_level_ignores_silence() -> None:
    rate = 16_000
    tone = (0.1 * np.sin(2 * np.pi * 440 * np.arange(rate) / rate)).astype(np.float32)
    level = active_dbfs(tone, rate)
    assert level is not None and level == pytest.approx(-23.0, abs=0.1)  # a sine of 0.1 peak: -23 dBFS
    padded = active_dbfs(np.concatenate([np.zeros(3 * rate, np.float32), tone]), rate)
    assert padded == pytest.approx(level, abs=0.01)
    assert active_dbfs(np.zeros(rate, np.float32), rate) is None


def test_every_barge_in_without_user_speech_is_false() -> None:
    assert sort_barge_ins([10.0, 12.0], None, None).false == (10.0, 12.0)
    assert sort_barge_ins([], None, None).detected_at is None


def test_the_first_barge_in_over_the_users_speech_detects_it_and_the_others_are_false() -> None:
    sorted_ = sort_barge_ins([9.0, 10.2, 10.4, 10.9 + DETECT_WINDOW_S + 0.1], 10.0, 10.9)
    assert sorted_.detected_at == 10.2
    assert sorted_.false == (9.0, 10.4, 10.9 + DETECT_WINDOW_S + 0.1)  # before the user, a repeat, much later
    assert sort_barge_ins([10.9 + DETECT_WINDOW_S - 0.1], 10.0, 10.9).detected_at is not None


def test_playback_stopped_where_the_barge_in_left_the_speaker_silent_not_at_an_earlier_gap() -> None:
    """The user began in a gap of the answer (synthesis behind), the answer played on for 0.4 s and the barge-in
    stopped it: the stop is where that last silence began, not the gap (whose words the user did hear)."""
    sound = [False] * 5 + [True] * 40 + [False] * 30  # windows of 10 ms from the user's first word: quiet = ~sound
    quiet = ~np.array(sound)
    assert stop_window(quiet, 30, dropped=60) == 45
    assert stop_window(quiet, 30, dropped=None) == 45  # no barge-in: the first 0.3 s of silence, a gap too short
    assert stop_window(quiet, 3, dropped=None) == 0  # ... or, for a shorter need, the gap itself
    assert stop_window(quiet, 3, dropped=20) == 45  # still sounding at the barge-in: the next silence after it
    always = np.ones(50, dtype=bool)
    assert stop_window(always, 30, dropped=15) == 0  # silent from the user's first word on: stopped at once


def test_the_played_prefix_follows_the_transcript_despite_misheard_words() -> None:
    assert played_prefix(ANSWER, "The ocean is a vast and mysterious") == 7
    assert played_prefix(ANSWER, "The ocean is a fast and mysterious realm") == 8  # one word misheard
    assert played_prefix(ANSWER, "") == 0


@pytest.mark.parametrize(("spoken", "played", "matches"), [
    ("The ocean is a vast and mysterious", "The ocean is a vast and mysterious", True),
    ("The ocean is a vast and", "The ocean is a vast and mysterious", True),  # one word short: within +-1
    ("The ocean is a vast", "The ocean is a vast and mysterious", False),  # two short
    (ANSWER, "The ocean is a vast and mysterious", False),  # the history kept the rest: the failure to catch
    ("The sea is a vast and mysterious", "The ocean is a vast and mysterious", False),  # not what was generated
])
def test_a_history_matches_when_it_is_the_answers_start_within_one_word_of_what_played(
        spoken: str, played: str, matches: bool) -> None:
    assert check_history(ANSWER, spoken, played).matches is matches


def test_a_mode_needs_audio_echo_for_aec_and_maps_gate_and_off_without_it() -> None:
    with_echo = cast(Config, SimpleNamespace(sources={"audio.echo": None, "audio.echo_gate": None}))
    without = cast(Config, SimpleNamespace(sources={"audio.echo_gate": None}))
    assert mode_env("aec", with_echo) == {"VOICECLI_AUDIO__ECHO": "aec"}
    assert mode_env("off", with_echo) == {"VOICECLI_AUDIO__ECHO": "off"}
    assert mode_env("aec", without) is None
    assert mode_env("gate", without) == {"VOICECLI_AUDIO__ECHO_GATE": "true"}
    assert mode_env("off", without) == {"VOICECLI_AUDIO__ECHO_GATE": "false"}
    assert [kind_of(n) for n in range(4)] == ["echo_only", "interrupted", "echo_only", "interrupted"]


def _turn(kind: Kind, mode: str = "aec", echo_db: float = 6.0) -> DuplexTurn:
    turn = DuplexTurn(mode, echo_db, 80.0, 0, kind, QUESTION, played_at=100.0)
    turn.question_end = 101.7
    turn.answer_start = 102.5
    turn.answer_end = 110.0
    return turn


def test_an_interrupted_turn_waits_for_the_interruptions_own_turn() -> None:
    """The answer was cut and played out, but "Wait, stop." is still being ended and transcribed by the app: the
    next question must not be asked into the answer to it (INTERRUPTION_TURN_S after the last line at most)."""
    turn = _turn("interrupted")
    turn.interruption_played_at = 104.0
    for at, line in [(101.0, TurnLine("turn_started", 1, "Tell me about the ocean.", origin="spoken")),
                     (104.4, TurnLine("barge_in", 0, "", at=104.3)),
                     (104.6, TurnLine("turn_finished", 1, ANSWER, spoken="The ocean is", interrupted=True))]:
        turn.take(line.encode(), at)
    assert not turn.settled(107.0, speaker_quiet=True)
    assert turn.settled(104.6 + INTERRUPTION_TURN_S, speaker_quiet=True)  # heard as nothing: go on in the end
    turn.take(TurnLine("turn_started", 2, "Wait, stop.", origin="spoken").encode(), 107.5)
    assert not turn.settled(109.0, speaker_quiet=True)  # its answer has not finished
    turn.take(TurnLine("turn_finished", 2, "Okay.", spoken="Okay.").encode(), 110.0)
    assert turn.settled(111.1, speaker_quiet=True)


def test_lines_are_attributed_and_an_echo_only_turn_counts_every_barge_in_as_false() -> None:
    turn = _turn("echo_only")
    for at, line in [(101.0, TurnLine("turn_started", 1, "Tell me about the ocean.", origin="spoken")),
                     (104.0, TurnLine("barge_in", 0, "", at=103.9)),
                     (104.5, TurnLine("turn_started", 2, "The ocean is", origin="spoken")),
                     (105.0, TurnLine("turn_finished", 1, ANSWER, spoken="The ocean is", interrupted=True))]:
        turn.take(line.encode(), at)
    turn.take("not a turn line", 105.1)
    assert turn.barge_ins == [103.9] and len(turn.transcripts) == 2 and turn.last_line_at == 105.1
    assert not turn.settled(106.0, speaker_quiet=True)  # turn 2 has not finished
    turn.take(TurnLine("turn_finished", 2, "Yes.", spoken="Yes.").encode(), 107.0)
    assert not turn.settled(107.5, speaker_quiet=True) and not turn.settled(109.0, speaker_quiet=False)
    assert turn.settled(108.1, speaker_quiet=True)
    sample = turn.sample()
    assert sample.detail["false_barge_ins"] == 1 and sample.detail["echo_turns"] == 1
    assert sample.metrics["barge_in_detect_ms"] is None
    assert sample.metrics["felt_latency_ms"] == pytest.approx(800.0)


def _interrupted(detect_after_s: float | None, spoken: str, played: str) -> DuplexTurn:
    turn = _turn("interrupted")
    turn.interrupt_after_s = 1.5
    turn.interruption_played_at = 104.0
    turn.speech_start, turn.speech_end = 104.3, 105.0
    turn.take(TurnLine("turn_started", 1, QUESTION.text, origin="spoken").encode(), 101.0)
    if detect_after_s is not None:
        turn.take(TurnLine("barge_in", 0, "", at=104.3 + detect_after_s).encode(), 104.6)
        turn.take(TurnLine("turn_finished", 1, ANSWER, spoken=spoken, interrupted=True).encode(), 104.7)
    turn.take(TurnLine("turn_started", 2, "Wait, stop.", origin="spoken").encode(), 106.0)
    turn.take(TurnLine("turn_finished", 2, "Sure.", spoken="Sure.").encode(), 107.0)
    turn.playback_stopped = 104.3 + (detect_after_s or 0) + 0.05
    turn.played_text = played
    return turn


def test_holds_for_the_users_speech_are_timed_and_the_others_counted_as_pauses_without_the_user() -> None:
    """The first hold over the user's speech times how soon the answer's voice yielded (a second one between their
    words is theirs too); a hold in an echo-only answer, or before the user spoke, is a pause no user made."""
    turn = _interrupted(0.25, "The ocean is a vast", "the ocean is a vast and")
    for line, at in ((TurnLine("voice_held", 0, "", at=103.5), 103.6), (TurnLine("voice_released", 0, "", at=103.7),
                     103.8), (TurnLine("voice_held", 0, "", at=104.42), 104.5),
                     (TurnLine("voice_released", 0, "", at=104.6), 104.7),
                     (TurnLine("voice_held", 0, "", at=104.8), 104.9)):
        turn.take(line.encode(), at)
    sample = turn.sample()
    assert sample.metrics["voice_held_ms"] == pytest.approx(120.0)
    assert (sample.detail["false_holds"], len(sample.detail["releases_s"])) == (1, 2)
    assert sample.detail["false_hold_pauses_ms"] == [pytest.approx(200.0)]
    echo = _turn("echo_only")
    echo.take(TurnLine("voice_held", 0, "", at=105.0).encode(), 105.1)
    echo.take(TurnLine("voice_released", 0, "", at=105.2).encode(), 105.3)
    quiet = echo.sample()
    assert quiet.metrics["voice_held_ms"] is None and quiet.detail["false_holds"] == 1
    aec = summary_by_mode([sample, quiet], ["aec"])["aec"]
    assert (aec["voice_held_p50_ms"], aec["false_holds"], aec["holds_released"]) == (120.0, 2, 3)
    assert aec["false_hold_pause_p50_ms"] == pytest.approx(200.0)  # 200 and 200


def test_summary_by_mode_has_the_issues_schema_and_counts_per_echo_level(tmp_path: Path) -> None:
    turns = [_turn("echo_only"), _interrupted(0.2, "The ocean is a vast", "the ocean is a vast and"),
             _interrupted(0.3, ANSWER, "the ocean is a"), _interrupted(None, "", ""),
             _turn("echo_only", echo_db=0.0)]
    turns[0].erle_db, turns[0].erle_live_db = 30.0, 24.0
    turns[0].echo_delay_ms, turns[0].echo_delay_range_ms = 84.0, (81.0, 97.0)
    turns[1].talk_over, turns[3].talk_over = 0.9, 0.7  # the first detected and the missed one spoke over the echo
    turns[0].take(TurnLine("barge_in", 0, "", at=105.0).encode(), 105.1)
    turns[0].take(TurnLine("turn_started", 1, QUESTION.text, origin="spoken").encode(), 101.0)
    samples = [t.sample() for t in turns]
    assert samples[1].metrics["barge_in_detect_ms"] == pytest.approx(200.0)
    assert samples[1].metrics["playback_stopped_ms"] == pytest.approx(250.0)
    assert samples[1].detail["echo_turns"] == 0  # the question and the interruption are the user's turns
    summary = summary_by_mode(samples, ["aec"])
    aec = summary["aec"]
    assert set(aec) >= SUMMARY_KEYS
    assert (aec["answers"], aec["echo_only_answers"], aec["false_barge_ins"]) == (5, 2, 1)
    assert (aec["barge_ins"], aec["barge_ins_detected"]) == (3, 2)
    assert (aec["barge_ins_in_double_talk"], aec["barge_ins_in_double_talk_detected"]) == (2, 1)
    assert (aec["barge_in_detect_p50_ms"], aec["erle_db"], aec["erle_live_db"]) == (250.0, 30.0, 24.0)
    assert (aec["history_matches"], aec["history_checked"]) == (1, 2)  # the second kept the whole answer
    assert set(aec["by_echo_db"]) == {"0", "6"} and aec["by_echo_db"]["0"]["echo_only_answers"] == 1
    assert set(aec["by_echo_db"]["6"]) >= SUMMARY_KEYS
    result = BenchResult("duplex", "run", {"llm": "x", "stt_model": "tiny.en", "voice": "af_heart",
                                           "turns_per_echo_level": 4, "echo_delays_ms": [80.0],
                                           "router_own_latency_ms": 30.0, "user_voice_dbfs": -20.0,
                                           "router_calibration_lags_ms": [30.0, 190.5, 28.0],
                                           "assistant_voice_dbfs": -18.0}, {}, samples)
    result.extra["summary_by_mode"] = summary
    markdown = render_markdown(result)
    assert "| aec | all | 5 | 2 | **1** |" in markdown and "| aec | +6 dB |" in markdown
    assert "| 300 | – / – | 0 (–) | 0 | 30.0 / 24.0 |" in markdown  # stopped p50; nothing held; ERLE replayed / live
    assert "= 5 vs 6 words" in markdown and "≠ 17 vs 4 words" in markdown
    assert "| 84 (81-97) |" in markdown  # the room's delay over the answer's pieces, beside their median
    assert "own latency 30.0 ms, the median of bursts at 30 / 190.5 / 28 ms" in markdown


def test_each_echo_delay_is_an_app_session_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A room keeps its delay from one answer to the next: the delays of a run are sessions, not turns, and the
    questions go on from one session to the next instead of starting over."""
    calls: list[tuple[float, int]] = []

    def session(pulse: object, router: object, command: object, env: object, mode: str, delay_ms: float,
                plan: Plan, voices: object, bar: object, first_index: int) -> list[DuplexTurn]:
        calls.append((delay_ms, first_index))
        count = len(plan.echo_db) * plan.turns
        return [DuplexTurn(mode, 0.0, delay_ms, n, kind_of(n), QUESTION, 0.0) for n in range(count)]

    monkeypatch.setattr(duplex, "run_session", session)
    plan = Plan(("aec",), (0.0, 6.0), (40.0, 80.0, 120.0), 2)
    turns = duplex.run_mode(cast(PrivatePulse, None), cast(EchoRouter, None), [], {}, "aec", plan,
                            cast(Voices, None), None)
    assert calls == [(40.0, 0), (80.0, 4), (120.0, 8)]
    assert [t.delay_ms for t in turns] == [40.0] * 4 + [80.0] * 4 + [120.0] * 4


def test_app_log_asks_each_session_to_log_at_info_level_to_a_file_of_its_own(tmp_path: Path) -> None:
    plan = Plan(("aec",), (0.0,), (40.0,), 2)
    assert duplex.session_command(["app", "chat"], plan, "aec", 40.0) == ["app", "chat"]
    logged = replace(plan, app_log=tmp_path)
    assert duplex.session_command(["app", "chat"], logged, "aec", 40.0) == [
        "app", "chat", "--log-level", "info", "--log-file", str(tmp_path / "aec-40ms.log")]


def test_a_kept_session_loads_back_as_it_was_with_its_echo_only_spans(tmp_path: Path) -> None:
    """--keep-audio: what the replay reads is what the run measured (samples, clock mapping, which answers count);
    an interrupted or runaway answer is no ERLE span."""
    rng = np.random.default_rng(1)
    mic, speaker = rng.normal(0, 0.1, 48_000).astype(np.float32), rng.normal(0, 0.1, 40_000).astype(np.float32)
    timing = Timing(np.array([0.0, 16_000.0, 32_000.0]), np.array([5.0, 6.0, 7.001]))
    echo, interrupted, runaway = (DuplexTurn("aec", 0.0, 40.0, n, kind_of(n), QUESTION, 0.0) for n in range(3))
    echo.echo_frames, interrupted.echo_frames, runaway.echo_frames = (100, 20_000), (20_000, 30_000), (30_000, 47_000)
    runaway.runaway = True
    save_session(tmp_path / "kept" / "aec-40ms.npz", Session(mic, timing, speaker, timing),
                 [echo, interrupted, runaway])
    loaded, spans = load_session(tmp_path / "kept" / "aec-40ms.npz")
    assert np.array_equal(loaded.mic, mic) and np.array_equal(loaded.speaker, speaker)
    assert loaded.mic_timing.time(24_000) == pytest.approx(6.5005) and loaded.speaker_timing.frame(6.0) == 16_000
    assert spans == [(100, 20_000)]
    assert span_erle(mic, mic * 0.01, spans[0]) == pytest.approx(40.0)
    assert span_erle(mic, mic, (0, 7_000)) is None  # under half a second: no figure


def test_the_live_output_is_laid_where_its_capture_matches_the_recording(tmp_path: Path) -> None:
    """The app's canceller dump (what it handed on live) is laid on the microphone recording for ERLE live: its
    block times disagree with the recorder's (here 30 ms, then 70 ms, within LIVE_SEARCH_S), so each piece lands
    where its capture matches the recording, sample for sample; before the dump begins nothing is laid."""
    rng = np.random.default_rng(2)
    mic = rng.normal(0, 0.1, 10 * 16_000).astype(np.float32)
    timing = Timing(np.array([0.0, 160_000.0]), np.array([100.0, 110.0]))
    dump = EchoDump(tmp_path / "aec-80ms")
    start = 3_200
    for first in range(start, len(mic) - 512 + 1, 512):
        block = mic[first : first + 512]
        late = 0.03 if first < 80_000 else 0.07
        at = timing.time(first + 511) + late
        dump.write(block, block * 0.5, None, block * 0.1, (at, first, 512, 0, -1, True, True, False))
    dump.close()
    live = live_output(Session(mic, timing, mic, timing), tmp_path / "aec-80ms")
    assert live is not None and len(live) == len(mic)
    end = start + (len(mic) - start) // 512 * 512
    assert np.array_equal(live[start:end], mic[start:end] * 0.1)
    assert not live[:start].any()
    assert span_erle(mic, live, (start, end)) == pytest.approx(20.0)
    assert live_output(Session(mic, timing, mic, timing), tmp_path / "none") is None
    echo = DuplexTurn("aec", 0.0, 80.0, 0, kind_of(0), QUESTION, 0.0)
    echo.echo_frames = (start, end)
    save_session(tmp_path / "aec-80ms.npz", Session(mic, timing, mic, timing), [echo])
    assert live_erle(tmp_path / "aec-80ms.npz") == pytest.approx([20.0])  # scripts/duplex_replay.py prints it


def test_no_answer_means_no_answers_counted_and_no_interruption_claimed() -> None:
    turn = DuplexTurn("gate", 6.0, 80.0, 1, "interrupted", QUESTION, played_at=100.0)
    turn.speech_start, turn.speech_end = 104.3, 105.0
    turn.take(TurnLine("barge_in", 0, "", at=104.4).encode(), 104.5)
    sample = turn.sample()
    assert not sample.detail["answered"] and not sample.detail["spoke_over_answer"]
    assert sample.detail["false_barge_ins"] == 1  # no answer to speak over: speech is no barge-in
    gate = summary_by_mode([sample], ["gate"])["gate"]
    assert (gate["answers"], gate["barge_ins"], gate["barge_in_detect_p50_ms"]) == (0, 0, None)


@pytest.mark.parametrize(("args", "message"), [
    (["--modes", "aec,nope"], "--modes takes a comma list of aec, gate, off, not 'aec,nope'"),
    (["--turns", "0"], "--turns must be at least 1"),
    (["--echo-gains", "6,x"], "--echo-gains takes a comma list of numbers, not 'x'"),
    (["--delay-ms", "900"], "--delay-ms 900 is outside 0..500"),
])
def test_bad_options_stop_with_one_line_before_anything_starts(args: list[str], message: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "duplex", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pulseaudio") is None or shutil.which("espeak-ng") is None,
                    reason="needs pulseaudio and espeak-ng")
def test_duplex_bench_end_to_end(server: RunningServer, tmp_path: Path) -> None:
    """Two turns per mode (one echo only, one interrupted) with the echo 6 dB over the user's voice: the schema is
    complete for every mode, and the echo path really carried each answer into the microphone (found there by
    cross-correlation at about the delay asked for, at about the level asked for)."""
    bench(server, tmp_path, "duplex", "--modes", "aec,gate,off", "--turns", "2", "--echo-gains", "6",
          "--delay-ms", "80", "--keep-audio", str(tmp_path / "kept"), "--app-log", str(tmp_path / "logs"),
          env={"VOICECLI_LLM__BACKEND": "local", "VOICECLI_LLM__MAX_TOKENS": "48"},
          timeout=1500)
    data, markdown = outputs(tmp_path, "duplex", [])
    modes = data["settings"]["modes"]
    assert set(modes) <= {"aec", "gate", "off"} and {"gate", "off"} <= set(modes)
    assert 5 < data["settings"]["router_own_latency_ms"] < 80
    for mode in modes:
        row = data["summary_by_mode"][mode]
        assert set(row) >= SUMMARY_KEYS, mode
        assert row["answers"] >= 1 and row["echo_only_answers"] <= 1 and row["barge_ins_detected"] <= row["barge_ins"]
    echoes = [s["detail"] for s in data["samples"] if s["detail"]["kind"] == "echo_only" and s["detail"]["answered"]
              and not s["detail"]["runaway"]]
    assert echoes
    for detail in echoes:
        assert detail["echo_correlation"] > 0.3, detail
        # a loaded machine can make the router late mid-answer, and the rest of that answer later (never earlier)
        assert 50 <= detail["echo_delay_ms"] <= 80 + 120, detail
        assert detail["echo_to_voice_db"] == pytest.approx(6, abs=4), detail
    if "aec" in modes:
        erle = data["summary_by_mode"]["aec"]["erle_db"]
        assert erle is None or (math.isfinite(erle) and erle > 0)
        # the kept recordings replay to the run's own figures (scripts/duplex_replay.py measures changes on them)
        measured = [s["detail"]["erle_db"] for s in data["samples"]
                    if s["variant"] == "aec" and s["detail"]["erle_db"] is not None]
        assert replay_erle(tmp_path / "kept" / "aec-80ms.npz") == pytest.approx(measured, abs=0.01)
        # and what the app's canceller handed on live, from its dump (the first answer passes through until the
        # echo is found, so it may read ~0 dB)
        live = data["summary_by_mode"]["aec"]["erle_live_db"]
        assert (live is None) == (erle is None) and (live is None or math.isfinite(live))
    kept = [f"{m}-80ms.npz" for m in modes] + (["aec-80ms"] if "aec" in modes else [])  # + the canceller's dump
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == sorted(kept)
    if "aec" in modes:  # what the app's canceller was fed live, block by block (audio.echo_dump)
        audio, blocks = load_dump(tmp_path / "kept" / "aec-80ms")
        assert len(blocks) and len({len(samples) for samples in audio.values()}) == 1
        assert len(audio["capture"]) == int(blocks[:, COLUMNS.index("samples")].sum())
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [f"{m}-80ms.log" for m in sorted(modes)]
    assert all(s["detail"]["played_at_wall"] > 1.7e9 for s in data["samples"])
    assert "| gate | all |" in markdown and "false barge-ins" in markdown
