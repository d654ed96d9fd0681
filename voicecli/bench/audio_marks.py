"""Where sound starts and stops in a recording: the audio-side marks of `voicecli bench turns`.

Why a level threshold over short windows and not a VAD: the bench must measure the app from the outside, with a
rule that does not share the app's own speech detector (or its mistakes). A window counts as sound when its RMS
level is above AUDIBLE_DBFS (-40 dBFS, well above the digital silence of the virtual devices and MP3 decoder
noise, well below any spoken syllable); within the first and last such window the mark is refined to the first
(last) single sample whose magnitude reaches the same level, so a mark is sample-accurate rather than rounded to a
window.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from voicecli.capture import rms_dbfs

AUDIBLE_DBFS = -40.0
"""Level above which a 10 ms window counts as sound (speech or answer audio)."""
WINDOW_MS = 10.0
PAUSE_MIN_MS = 100.0
"""Shorter gaps between sounding windows are inside a word (stops, plosives), not a pause."""


def _windows(samples: NDArray[np.float32], rate: int, window_ms: float) -> tuple[int, NDArray[np.bool_]]:
    """(window length in samples, one flag per whole window: is its RMS above AUDIBLE_DBFS)."""
    if samples.ndim != 1:
        raise ValueError("expected mono samples")
    size = max(1, round(rate * window_ms / 1000))
    count = len(samples) // size
    loud = np.array([rms_dbfs(samples[i * size:(i + 1) * size]) > AUDIBLE_DBFS for i in range(count)], dtype=bool)
    return size, loud


def sound_span(samples: NDArray[np.float32], rate: int, window_ms: float = WINDOW_MS) -> tuple[int, int] | None:
    """Indices of the first and last audible samples, or None when nothing is audible.

    The first index is the first sample of the first loud window whose magnitude reaches AUDIBLE_DBFS as an
    amplitude; the last one likewise backwards within the last loud window.
    """
    size, loud = _windows(samples, rate, window_ms)
    hits = np.flatnonzero(loud)
    if hits.size == 0:
        return None
    amplitude = 10 ** (AUDIBLE_DBFS / 20)
    first_window = samples[hits[0] * size:(hits[0] + 1) * size]
    last_window = samples[hits[-1] * size:(hits[-1] + 1) * size]
    first = int(hits[0] * size + np.flatnonzero(np.abs(first_window) >= amplitude)[0])
    last = int(hits[-1] * size + np.flatnonzero(np.abs(last_window) >= amplitude)[-1])
    return first, last


def first_audible(samples: NDArray[np.float32], rate: int) -> int | None:
    """Index of the first audible sample (the start of an answer on the speaker), None when silent throughout."""
    span = sound_span(samples, rate)
    return None if span is None else span[0]


def last_voiced(samples: NDArray[np.float32], rate: int) -> int | None:
    """Index of the last voiced sample (the end of a question), None when silent throughout."""
    span = sound_span(samples, rate)
    return None if span is None else span[1]


def pauses_ms(samples: NDArray[np.float32], rate: int, window_ms: float = WINDOW_MS) -> list[float]:
    """Silent gaps between the first and last audible windows, in ms, when at least PAUSE_MIN_MS long."""
    _, loud = _windows(samples, rate, window_ms)
    hits = np.flatnonzero(loud)
    gaps = (np.diff(hits) - 1) * window_ms
    return [float(g) for g in gaps if g >= PAUSE_MIN_MS]


def trim(samples: NDArray[np.float32], rate: int) -> NDArray[np.float32]:
    """The samples from the first to the last audible one (empty when nothing is audible)."""
    span = sound_span(samples, rate)
    return samples[:0] if span is None else samples[span[0]:span[1] + 1]
