"""Signal level in dBFS: the one measure the microphone's meter, the speaker's meter, the barge-in gate and the
bench's virtual devices all read, so a level means the same thing wherever it is compared."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

SILENCE_DBFS = -120.0
"""Floor of the level meters: what digital silence reads as."""


def rms_dbfs(samples: NDArray[np.float32]) -> float:
    """RMS level in dB relative to full scale (a full-scale square wave reads 0 dBFS, a sine -3 dBFS)."""
    if len(samples) == 0:
        return SILENCE_DBFS
    rms = math.sqrt(float(np.mean(np.square(samples, dtype=np.float64))))
    return max(SILENCE_DBFS, 20.0 * math.log10(rms)) if rms > 0 else SILENCE_DBFS


def speech_level_dbfs(samples: NDArray[np.float32], window: int = 512, percentile: float = 80.0) -> float:
    """How loud a voice is in an utterance: the `percentile` of its windows' levels (32 ms at 16 kHz). Why not the
    utterance's RMS: an utterance holds a pre-roll, pauses between words and a silent tail, which would read as a
    quieter voice the more the speaker paused; the loud fifth of the windows is the voice itself."""
    levels = [rms_dbfs(samples[i : i + window]) for i in range(0, len(samples) - window + 1, window)]
    return float(np.percentile(levels, percentile)) if levels else SILENCE_DBFS
