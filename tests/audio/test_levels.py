"""voicecli.audio.levels: RMS level in dBFS."""

from __future__ import annotations

import numpy as np
import pytest

from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs


def test_rms_dbfs() -> None:
    assert rms_dbfs(np.zeros(512, dtype=np.float32)) == SILENCE_DBFS
    assert rms_dbfs(np.zeros(0, dtype=np.float32)) == SILENCE_DBFS
    assert rms_dbfs(np.ones(512, dtype=np.float32)) == pytest.approx(0.0)
    sine = np.sin(np.arange(16000) * 2 * np.pi * 440 / 16000).astype(np.float32)
    assert rms_dbfs(sine) == pytest.approx(-3.01, abs=0.01)
    assert rms_dbfs(0.1 * sine) == pytest.approx(-23.01, abs=0.01)
