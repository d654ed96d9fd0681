"""The spoken questions of the benches: built-in sets voiced with exact pauses, noise and several voices, a user's
folder, and the manifest that carries what each says from one to the other."""

from __future__ import annotations

import argparse
import json
import shutil
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.fakes.endpoint import InProcessEndpoint
from voicecli.bench.audio_marks import pauses_ms, sound_span
from voicecli.bench.question_sets import HOLDOUT, LATENCY, QUALITY, SETS, TUNED_ON
from voicecli.bench.questions import (
    ESPEAK,
    LEAD_IN_S,
    NOISE_SNR_DB,
    SEGMENT,
    VOICES,
    add_noise,
    built_in,
    from_directory,
    kokoro_speech,
    voice_set,
    voicing_for,
    write_manifest,
)
from voicecli.bench.scoring import words
from voicecli.bench.target import BenchError

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


def read(path: Path) -> tuple[np.ndarray, int]:
    data, rate = soundfile.read(str(path), dtype="float32")
    return np.asarray(data, dtype=np.float32), int(rate)


@needs_espeak
def test_built_in_questions_carry_exact_mid_sentence_pauses(tmp_path: Path) -> None:
    questions = built_in(tmp_path)
    assert [q.text for q in questions] == [spec.text for spec in LATENCY]
    assert [q.answers for q in questions] == [spec.answers for spec in LATENCY]
    assert not (tmp_path / SEGMENT).exists()  # the folder holds questions only
    paused = [q for q, spec in zip(questions, LATENCY, strict=True) if len(spec.segments) > 1]
    assert len(paused) >= 3 and questions[1] in paused  # `--turns 2` already meets a pause
    for question in questions:
        samples, rate = read(question.path)
        with wave.open(str(question.path)) as w:
            assert (w.getnchannels(), w.getsampwidth()) == (1, 2)  # what paplay plays is what was analysed
        first, last = sound_span(samples, rate) or (0, 0)
        assert first / rate == pytest.approx(question.voiced_start_s, abs=1e-3)
        assert question.voiced_end_s == pytest.approx(last / rate, abs=1e-3)
        assert question.voiced_start_s == pytest.approx(LEAD_IN_S, abs=0.01)
        assert question.duration_s - question.voiced_end_s == pytest.approx(LEAD_IN_S, abs=0.01)
    for question in paused:
        longest = max(pauses_ms(read(question.path)[0], question.rate))
        assert 400 - 3 <= longest <= 600 + 3 and max(question.pauses_ms) == longest


def test_a_folder_of_wav_files_is_read_at_any_rate_and_channel_count(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    t = np.arange(44_100) / 44_100
    stereo = np.stack([0.3 * np.sin(2 * np.pi * 200 * t)] * 2, axis=1)
    soundfile.write(str(folder / "b.wav"), np.concatenate([np.zeros((4410, 2)), stereo]), 44_100, subtype="FLOAT")
    soundfile.write(str(folder / "a.wav"), np.concatenate([0.3 * np.sin(2 * np.pi * 200 * t[:8000]),
                                                           np.zeros(8000)]), 16_000)
    (folder / "notes.txt").write_text("not a question")
    a, b = from_directory(folder, tmp_path / "work")
    assert (a.name, b.name) == ("a.wav", "b.wav") and a.text == ""
    assert b.rate == 44_100 and b.voiced_start_s == pytest.approx(0.1, abs=0.002)
    assert a.voiced_end_s == pytest.approx(0.5, abs=0.002)
    assert a.path.parent == tmp_path / "work"


def test_bad_question_folders_get_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="not a directory"):
        from_directory(tmp_path / "missing", tmp_path / "work")
    with pytest.raises(BenchError, match=r"no \.wav files"):
        from_directory(tmp_path, tmp_path / "work")
    (tmp_path / "broken.wav").write_bytes(b"RIFF nonsense")
    with pytest.raises(BenchError, match="cannot read"):
        from_directory(tmp_path, tmp_path / "work")
    (tmp_path / "broken.wav").unlink()
    soundfile.write(str(tmp_path / "quiet.wav"), np.zeros(16_000), 16_000)
    with pytest.raises(BenchError, match="silent"):
        from_directory(tmp_path, tmp_path / "work")


def _tone(path: Path) -> None:
    t = np.arange(16_000) / 16_000
    soundfile.write(str(path), 0.3 * np.sin(2 * np.pi * 200 * t), 16_000)


def test_a_manifest_says_what_each_wav_asks_and_which_answers_are_right(tmp_path: Path) -> None:
    for name in ("q00.wav", "q01.wav", "q02.wav"):
        _tone(tmp_path / name)
    (tmp_path / "questions.json").write_text(json.dumps({"questions": [
        {"file": "q00.wav", "text": "What is the capital of France?", "answers": ["paris"]},
        {"file": "q01.wav", "text": "Name a large animal."},
    ]}))
    q00, q01, q02 = from_directory(tmp_path, tmp_path / "work")
    assert (q00.text, q00.answers) == ("What is the capital of France?", ("paris",))
    assert (q01.text, q01.answers) == ("Name a large animal.", ())  # timed and its transcript scored
    assert (q02.text, q02.answers) == ("", ())  # not in the manifest: timed only, as without one


@pytest.mark.parametrize(("manifest", "message"), [
    ("[1, 2]", "not a questions manifest"),
    ('{"questions": [{"file": "q00.wav"}]}', "not a questions manifest"),
    ('{"questions": [{"file": "q00.wav", "text": "Hi?", "answers": "paris"}]}', "not a questions manifest"),
    ('{"questions": [{"file": "q09.wav", "text": "Hi?"}]}', "names q09.wav, not among the .wav files"),
    ("{not json", "not a questions manifest"),
])
def test_a_bad_manifest_gets_a_clear_error(tmp_path: Path, manifest: str, message: str) -> None:
    _tone(tmp_path / "q00.wav")
    (tmp_path / "questions.json").write_text(manifest)
    with pytest.raises(BenchError, match=message):
        from_directory(tmp_path, tmp_path / "work")


def test_the_sets_are_distinct_scored_and_large_enough() -> None:
    assert len(QUALITY) >= 30 and len(HOLDOUT) >= 20
    assert all(spec.answers for spec in (*QUALITY, *HOLDOUT))  # every question of both is scored
    texts = [words(spec.text) for spec in (*QUALITY, *HOLDOUT)]
    assert len({tuple(t) for t in texts}) == len(texts)  # no question in both (holdout is never tuned on)
    assert "holdout" not in TUNED_ON and {"latency", "quality", "holdout"} <= set(SETS)
    assert sum(len(spec.segments) > 1 for spec in QUALITY) >= 8  # mid-sentence pauses


def test_quality_voicings_mix_voices_rates_and_noise() -> None:
    voicings = [voicing_for("quality", i) for i in range(len(QUALITY))]
    kokoro_voices = {v.voice for v in voicings if v.voice != ESPEAK}
    assert len(kokoro_voices) >= 4 and "af_heart" not in kokoro_voices  # not the app's own voice
    assert 0.2 <= sum(v.voice == ESPEAK for v in voicings) / len(voicings) <= 0.3
    assert {v.speed for v in voicings} >= {0.9, 1.2} and all(0.9 <= v.speed <= 1.2 for v in voicings)
    noisy = [v for v in voicings if v.noise_snr_db is not None]
    assert len(noisy) == len(QUALITY) // 3 and {v.noise_snr_db for v in noisy} == {NOISE_SNR_DB}
    assert {(v.voice, v.speed) for v in voicings} > {(v.voice, v.speed) for v in voicings[:8]}  # combinations vary
    assert all(voicing_for("latency", i).voice == ESPEAK for i in range(len(LATENCY)))
    assert set(VOICES) - {ESPEAK} <= set(kokoro_voices)


def test_noise_is_added_at_the_stated_snr_over_the_speech() -> None:
    rate = 16_000
    t = np.arange(rate) / rate
    speech = np.concatenate([np.zeros(rate // 2), 0.3 * np.sin(2 * np.pi * 220 * t), np.zeros(rate // 2)])
    noisy = add_noise(speech.astype(np.float32), rate, 20.0, seed=1)
    noise = noisy - speech
    snr = 10 * np.log10(np.mean(speech[rate // 2: -rate // 2] ** 2) / np.mean(noise**2))
    assert snr == pytest.approx(20.0, abs=0.3)
    assert np.any(noisy[: rate // 2] != 0)  # the room is noisy before the question too
    assert np.array_equal(noisy, add_noise(speech.astype(np.float32), rate, 20.0, seed=1))  # same every run


def test_kokoro_voicing_goes_through_the_endpoint_and_a_refusal_is_clear(fake_endpoint: InProcessEndpoint) -> None:
    audio, rate = kokoro_speech("What is the capital of Spain?", "am_michael", 1.1, fake_endpoint.http_url, "")
    assert rate == 24_000 and len(audio) > rate // 4 and float(np.max(np.abs(audio))) > 0.01
    with pytest.raises(BenchError, match=r"refused to voice .* with zz_nobody: 400"):
        kokoro_speech("Hello there.", "zz_nobody", 1.0, fake_endpoint.http_url, "")
    with pytest.raises(BenchError, match="did not voice"):
        kokoro_speech("Hello there.", "am_michael", 1.0, "http://127.0.0.1:9", "")


@needs_espeak
def test_a_voiced_set_round_trips_through_its_manifest(tmp_path: Path) -> None:
    questions = voice_set("latency", tmp_path / "set")
    write_manifest(questions, tmp_path / "set")
    again = from_directory(tmp_path / "set", tmp_path / "work")
    assert [(q.text, q.answers) for q in again] == [(q.text, q.answers) for q in questions]
    assert json.loads((tmp_path / "set" / "questions.json").read_text())["questions"][0]["voicing"] == {
        "engine": "espeak-ng", "voice": "en-us", "speed": 1.0, "noise_snr_db": None}


@needs_espeak
async def test_a_bench_gets_its_default_set_or_the_one_asked_for(tmp_path: Path) -> None:
    from voicecli.bench.questions import voiced_questions
    from voicecli.config import Config

    args = argparse.Namespace(questions=None, question_set=None, default_set="latency")
    config = Config.load(env={}, config_path=None)
    questions, source = await voiced_questions(args, tmp_path / "a", config, print, limit=3)
    assert [q.text for q in questions] == [spec.text for spec in LATENCY[:3]]
    assert source == "built-in set 'latency' (8 questions, tuned on)"
    _tone(tmp_path / "q00.wav")
    args = argparse.Namespace(questions=str(tmp_path), question_set=None, default_set="quality")
    questions, source = await voiced_questions(args, tmp_path / "b", config, print)
    assert source == str(tmp_path) and [q.name for q in questions] == ["q00.wav"]
