"""Smart Turn v3.2 (voicecli.listen.smart_turn): the model file from the models directory, verified by its pin; the
input built as the model expects it; and the model hearing a finished question as more finished than the same
question cut mid-sentence."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from voicecli.audio.rates import SPEECH_RATE
from voicecli.listen.smart_turn import (
    FRAMES,
    MODEL_FILE,
    MODEL_NAME,
    WINDOW_SAMPLES,
    SmartTurn,
    SmartTurnModelMissing,
    features,
    last_window,
    smart_turn_model_path,
)
from voicecli.models.catalog import BY_NAME


def test_a_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(SmartTurnModelMissing, match="voicecli models install --only smart-turn"):
        smart_turn_model_path(tmp_path)
    with pytest.raises(SmartTurnModelMissing, match="voicecli models install --only smart-turn"):
        SmartTurn(tmp_path)


def test_the_catalog_pins_the_file_the_class_loads() -> None:
    spec = BY_NAME[MODEL_NAME]
    assert not spec.optional
    assert [f.name for f in spec.files] == [MODEL_FILE]
    assert spec.files[0].size == 8_679_182
    assert spec.registry[0].parts[0].package == "pipecat-ai"


def test_short_audio_is_padded_in_front_and_long_audio_keeps_its_end() -> None:
    short = np.ones(SPEECH_RATE, dtype=np.float32)
    window = last_window(short)
    assert len(window) == WINDOW_SAMPLES
    assert not window[:-SPEECH_RATE].any() and window[-SPEECH_RATE:].all()
    long = np.arange(WINDOW_SAMPLES + 100, dtype=np.float32)
    assert last_window(long)[0] == 100 and last_window(long)[-1] == WINDOW_SAMPLES + 99


def test_features_are_whisper_log_mels_of_8_s_with_the_speech_at_the_end() -> None:
    t = np.arange(SPEECH_RATE // 2) / SPEECH_RATE
    tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    mels = features(tone)
    assert mels.shape == (1, 80, FRAMES) and mels.dtype == np.float32
    energy = mels[0].max(axis=0)  # the loudest band of each frame
    assert energy[-40:].mean() > energy[:700].mean() + 0.5  # the last 0.5 s is where the sound is
    assert mels.min() >= mels.max() - 2.0 - 1e-6  # Whisper's clamp 8 decades below the peak, then (x + 4) / 4


def test_the_installed_file_matches_its_pin(models_dir: Path) -> None:
    path = smart_turn_model_path(models_dir)
    pin = BY_NAME[MODEL_NAME].files[0]
    assert path.stat().st_size == pin.size
    assert hashlib.sha256(path.read_bytes()).hexdigest() == pin.sha256


def test_a_finished_question_sounds_more_finished_than_the_same_cut_mid_sentence(models_dir: Path,
                                                                                   server: object) -> None:
    """Kokoro's voice (the endpoint's), not espeak-ng's: Smart Turn misjudges espeak's robotic voice both ways
    (measured: cut questions often score higher than whole ones), so a test on it would test espeak."""
    from voicecli.audio.resample import resample
    from voicecli.bench.audio_marks import trim
    from voicecli.bench.endpointing import word_boundary
    from voicecli.bench.questions import kokoro_speech

    url = server.http_url  # type: ignore[attr-defined]

    def speak(text: str) -> np.ndarray:
        audio, rate = kokoro_speech(text, "am_michael", 1.0, url, "")
        return np.asarray(resample(trim(audio, rate), rate, SPEECH_RATE), dtype=np.float32)

    model = SmartTurn(models_dir)
    silence = np.zeros(SPEECH_RATE // 5, dtype=np.float32)  # 200 ms into the pause, when the app asks
    lead = np.zeros(SPEECH_RATE // 4, dtype=np.float32)
    full = speak(QUESTION)
    cut = full[: word_boundary(full, len(speak(PREFIX)))]
    whole = model.probability(np.concatenate([lead, full, silence]))
    unfinished = model.probability(np.concatenate([lead, cut, silence]))
    assert whole > unfinished, (whole, unfinished)


QUESTION = "Could you tell me the capital of France?"
PREFIX = "Could you tell me the capital of"
