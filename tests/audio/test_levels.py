"""voicecli.audio.levels: RMS level in dBFS."""

from __future__ import annotations

import numpy as np
import pytest

from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs, speech_level_dbfs


def test_rms_dbfs() -> None:
    assert rms_dbfs(np.zeros(512, dtype=np.float32)) == SILENCE_DBFS
    assert rms_dbfs(np.zeros(0, dtype=np.float32)) == SILENCE_DBFS
    assert rms_dbfs(np.ones(512, dtype=np.float32)) == pytest.approx(0.0)
    sine = np.sin(np.arange(16000) * 2 * np.pi * 440 / 16000).astype(np.float32)
    assert rms_dbfs(sine) == pytest.approx(-3.01, abs=0.01)
    assert rms_dbfs(0.1 * sine) == pytest.approx(-23.01, abs=0.01)


def test_speech_level_is_the_voice_not_the_pauses() -> None:
    """An utterance of 20 windows of voice and 16 of pauses has an RMS 2.6 dB under the voice; its voice level
    reads the voice, however long the pauses, and nothing at all reads as silence."""
    voice = np.full(512 * 10, 0.1, dtype=np.float32)  # -20 dBFS
    pause = np.zeros(512 * 10, dtype=np.float32)
    utterance = np.concatenate([pause[:1536], voice, pause, voice, pause[:1536]])
    assert rms_dbfs(utterance) == pytest.approx(-22.55, abs=0.01)
    assert speech_level_dbfs(utterance) == pytest.approx(-20.0, abs=0.01)
    assert speech_level_dbfs(np.zeros(100, dtype=np.float32)) == SILENCE_DBFS
