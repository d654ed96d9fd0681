"""`voicecli bench stt`: variant choice, the app's cut of each question, the summaries and the report (fast, no
model), and one real decode round with tiny.en on an espeak-ng question (slow: the `models_dir` fixture)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voicecli.audio.rates import SPEECH_RATE
from voicecli.bench import stt
from voicecli.bench.progress import BenchProgress
from voicecli.bench.questions import Question, voice_set
from voicecli.bench.report import Sample
from voicecli.bench.target import BenchError
from voicecli.config import Config


def _config() -> Config:
    return Config.defaults()


def _question(start: float = 0.5, end: float = 1.5, voicing: dict[str, Any] | None = None,
              text: str = "What is the capital of France?") -> Question:
    return Question("q01", text, Path("q01.wav"), 24_000, 2.0, start, end, (), ("paris",), voicing or {})


def test_default_variants_are_the_installed_ones_and_names_are_checked() -> None:
    only_tiny = stt.choose_variants(None, lambda model: model == "tiny.en")
    assert only_tiny and all(v.model == "tiny.en" for v in only_tiny)
    assert only_tiny[0].name == "tiny.en" and only_tiny[0].beam_size == 5 and not only_tiny[0].prompt
    assert [v.name for v in stt.choose_variants("tiny.en-b1, tiny.en,tiny.en-b1", lambda _: True)] == [
        "tiny.en-b1", "tiny.en"]
    with pytest.raises(BenchError, match="unknown nope"):
        stt.choose_variants("tiny.en,nope", lambda _: True)
    with pytest.raises(BenchError, match=r"not installed .*--only whisper-base"):
        stt.choose_variants("base", lambda model: model == "tiny.en")
    with pytest.raises(BenchError, match="no Whisper model"):
        stt.choose_variants(None, lambda _: False)


def test_every_variant_name_is_unique() -> None:
    assert len(stt.BY_NAME) == len(stt.VARIANTS)
    assert {v.model for v in stt.VARIANTS} >= {"tiny.en", "base"}


def test_utterance_is_cut_like_the_endpointer_and_resampled() -> None:
    rate = 24_000
    samples = np.ones(2 * rate, dtype=np.float32)
    cut = stt.utterance(samples, rate, _question(0.5, 1.5), pre_roll_ms=300, tail_ms=90)
    # 0.2 s .. 1.59 s at 16 kHz, give or take the resampler's edge
    assert abs(len(cut) - round(1.39 * SPEECH_RATE)) <= 2
    assert cut.dtype == np.float32
    # clipped to the file at both ends
    whole = stt.utterance(np.ones(SPEECH_RATE, dtype=np.float32), SPEECH_RATE, _question(0.1, 0.95), 300, 250)
    assert len(whole) == SPEECH_RATE


def test_voicing_groups() -> None:
    assert stt.voicing_groups({}) == []
    assert stt.voicing_groups({"engine": "espeak-ng", "noise_snr_db": None}) == ["espeak-ng", "clean"]
    assert stt.voicing_groups({"engine": "kokoro", "noise_snr_db": 20.0}) == ["kokoro", "noisy"]


def _detail(errors: int, ref: int, decode_ms: float, engine: str = "kokoro", noisy: bool = False) -> dict[str, Any]:
    return {"question": "q", "text": "x", "transcript": "y", "word_errors": errors, "reference_words": ref,
            "decode_ms": decode_ms, "audio_s": 2.0, "tail_ms": 90, "context": "",
            "voicing": {"engine": engine, "voice": "af_bella", "noise_snr_db": 20.0 if noisy else None}}


def test_summary_pools_word_errors_and_estimates_felt_latency() -> None:
    details = [_detail(0, 6, 100.0), _detail(2, 4, 200.0, "espeak-ng", noisy=True), _detail(0, 5, 600.0)]
    row = stt.summarize_variant(details, tail_ms=90, complete_ms=650, felt_reference=(1000.0, 150.0))
    assert row["questions"] == 3 and row["questions_all_right"] == 2
    assert row["wer"] == pytest.approx(2 / 15)
    assert row["decode_p50_ms"] == pytest.approx(200.0)
    assert row["rtf"] == pytest.approx(0.9 / 6.0)
    assert row["ready_after_speech_end_p50_ms"] == pytest.approx(290.0)
    assert row["ready_before_confirmation"] == 2  # 90 + 600 > 650
    assert row["felt_estimate_p50_ms"] == pytest.approx(1050.0)
    assert row["wer_by_voicing"]["espeak-ng"]["wer"] == pytest.approx(0.5)
    assert row["wer_by_voicing"]["kokoro"] == {"questions": 2, "wer": 0.0, "questions_all_right": 2}
    assert row["wer_by_voicing"]["noisy"]["questions"] == 1 and row["wer_by_voicing"]["clean"]["questions"] == 2
    assert stt.summarize_variant(details, 90, 650, None)["felt_estimate_p50_ms"] is None


def test_felt_reference_reads_the_latest_turns_run(tmp_path: Path) -> None:
    assert stt.felt_reference(tmp_path) is None
    latest = tmp_path / "latest" / "turns"
    latest.mkdir(parents=True)
    (latest / "results.json").write_text(json.dumps({"name": "turns-x", "summary_by_mode": {"bidi": {
        "felt_latency_p50_ms": 1085.8, "timeline_marks_p50_ms": {"transcript_ready": 162.1}}}}))
    assert stt.felt_reference(tmp_path) == (1085.8, 162.1, "turns-x")


def test_result_and_report_name_every_variant_and_misheard_question() -> None:
    variants = [stt.BY_NAME["tiny.en"], stt.BY_NAME["tiny.en-b1"]]
    samples = []
    for index, (a, b) in enumerate([(0, 1), (0, 0), (2, 0)]):
        for variant, errors in zip(variants, (a, b), strict=True):
            detail = _detail(errors, 6, 100.0 + 10 * index + (50 if variant.beam_size == 5 else 0))
            detail.update(question=f"q{index + 1:02d}", text=f"question {index}", transcript=f"heard {index}")
            samples.append(Sample(variant.name, 0.0, index, {"decode_ms": detail["decode_ms"]}, detail))
    result = stt.build_result("stt-test", samples, variants, "built-in set 'quality'", _config(), {},
                              (1000.0, 160.0, "turns-x"))
    by_variant = result.extra["summary_by_variant"]
    assert result.extra["baseline"] == "tiny.en"
    assert by_variant["tiny.en"]["wer"] == pytest.approx(2 / 18)
    assert by_variant["tiny.en-b1"]["questions_all_right"] == 2
    assert by_variant["tiny.en"]["felt_estimate_p50_ms"] == pytest.approx(1000.0)
    assert by_variant["tiny.en-b1"]["felt_estimate_p50_ms"] == pytest.approx(950.0)
    markdown = stt.render_markdown(result)
    assert "| tiny.en | 3 | 11.1% | 2 / 3 |" in markdown
    assert "\"question 2\" heard as \"heard 2\" (2 errors)" in markdown
    assert "\"question 0\" heard as \"heard 0\" (1 errors)" in markdown
    assert "turns-x" in markdown
    json.dumps(result.to_json())


@pytest.mark.slow
def test_real_round_with_tiny_en(models_dir: Path, tmp_path: Path) -> None:
    """One espeak-ng question through the bench's own decode loop with tiny.en, two variants side by side."""
    if shutil.which("espeak-ng") is None:
        pytest.fail("espeak-ng is needed: apt-get install espeak-ng")
    questions = voice_set("latency", tmp_path)[3:4]  # "How many legs does a spider have?"
    assert "spider" in questions[0].text
    config = _config().override({"models.dir": str(models_dir)}, "test")
    variants = [stt.BY_NAME["tiny.en"], stt.BY_NAME["tiny.en-context"]]
    with BenchProgress(len(variants), "test") as bar:
        samples = stt._transcribe_all(questions, variants, config, bar)
    assert [s.variant for s in samples] == ["tiny.en", "tiny.en-context"]
    for sample in samples:
        assert sample.detail["word_errors"] == 0, sample.detail["transcript"]
        assert 0 < sample.metrics["decode_ms"] < 5_000
    result = stt.build_result("t", samples, variants, "test", config, {}, None)
    assert result.extra["summary_by_variant"]["tiny.en"]["wer"] == 0.0


def test_run_refuses_an_unknown_variant(tmp_path: Path) -> None:
    args = argparse.Namespace(question_set=None, default_set="quality", questions=str(tmp_path), variants="nope",
                              out=str(tmp_path / "out"), name="x")
    from voicecli.errors import UserError

    with pytest.raises(UserError, match="unknown nope"):
        stt.run(args, _config())
