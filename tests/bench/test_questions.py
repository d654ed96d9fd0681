"""The spoken questions of `voicecli bench turns`: espeak-ng built-ins with exact pauses, and a user's folder."""

from __future__ import annotations

import json
import shutil
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile

from voicecli.bench.audio_marks import pauses_ms, sound_span
from voicecli.bench.questions import BUILT_IN, LEAD_IN_S, built_in, from_directory
from voicecli.bench.target import BenchError


def read(path: Path) -> tuple[np.ndarray, int]:
    data, rate = soundfile.read(str(path), dtype="float32")
    return np.asarray(data, dtype=np.float32), int(rate)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
def test_built_in_questions_carry_exact_mid_sentence_pauses(tmp_path: Path) -> None:
    questions = built_in(tmp_path)
    assert [q.text for q in questions] == [" ".join(segments) for segments, _ in BUILT_IN]
    assert [q.answers for q in questions] == [answers for _, answers in BUILT_IN]
    paused = [q for q, (segments, _) in zip(questions, BUILT_IN, strict=True) if len(segments) > 1]
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
