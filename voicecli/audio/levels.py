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
