"""Where sound starts and stops in a recording: the audio-side marks of `voicecli bench turns`.

Why a level threshold over short windows and not a VAD: the bench must measure the app from the outside, with a
rule that does not share the app's own speech detector (or its mistakes). A 10 ms window (one starting at every
sample) counts as sound when its RMS level is above AUDIBLE_DBFS (-40 dBFS: well above the digital silence of the
virtual devices and MP3 decoder noise, well below any spoken syllable); within the first and last such window the
mark is refined to the first (last) single sample whose magnitude reaches the same level, so a mark is
sample-accurate rather than rounded to a window.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

AUDIBLE_DBFS = -40.0
"""Level above which a 10 ms window counts as sound (speech or answer audio)."""
AMPLITUDE = 10 ** (AUDIBLE_DBFS / 20)
WINDOW_MS = 10.0
PAUSE_MIN_MS = 100.0
"""Shorter gaps between sounding windows are inside a word (stops, plosives), not a pause."""


def _loud_windows(samples: NDArray[np.float32], rate: int, window_ms: float) -> tuple[int, NDArray[np.intp]]:
    """(window length, the start index of every loud window): a window starts at EVERY sample, not on a grid.

    Why sliding: marks taken on a fixed grid move by up to a window when the same sound is shifted in the file
    (a question trimmed and re-joined, a recording that starts a little earlier); sliding windows do not.
    """
    if samples.ndim != 1:
        raise ValueError("expected mono samples")
    size = max(1, round(rate * window_ms / 1000))
    if len(samples) < size:
        return size, np.zeros(0, dtype=np.intp)
    energy = np.concatenate([[0.0], np.cumsum(np.square(samples, dtype=np.float64))])
    power = (energy[size:] - energy[:-size]) / size
    return size, np.flatnonzero(power > 10 ** (AUDIBLE_DBFS / 10))


def _first_loud_sample(samples: NDArray[np.float32], start: int, size: int) -> int:
    """The first sample at the audible level in the loud window at `start` (there is one: its RMS is above it)."""
    return int(start + np.flatnonzero(np.abs(samples[start:start + size]) >= AMPLITUDE)[0])


def _last_loud_sample(samples: NDArray[np.float32], start: int, size: int) -> int:
    return int(start + np.flatnonzero(np.abs(samples[start:start + size]) >= AMPLITUDE)[-1])


def sound_span(samples: NDArray[np.float32], rate: int, window_ms: float = WINDOW_MS) -> tuple[int, int] | None:
    """Indices of the first and last audible samples, or None when nothing is audible.

    The first index is the first sample of the first loud window whose magnitude reaches AUDIBLE_DBFS as an
    amplitude; the last one likewise backwards within the last loud window.
    """
    size, starts = _loud_windows(samples, rate, window_ms)
    if starts.size == 0:
        return None
    return _first_loud_sample(samples, int(starts[0]), size), _last_loud_sample(samples, int(starts[-1]), size)


def audible_share(samples: NDArray[np.float32], rate: int, window_ms: float = WINDOW_MS) -> float | None:
    """The share of the recording's windows that are audible (None for one shorter than a window): how much of a
    stretch had sound in it (the duplex bench: was the answer sounding while the user spoke?)."""
    size, starts = _loud_windows(samples, rate, window_ms)
    windows = len(samples) - size + 1
    return None if windows <= 0 else len(starts) / windows


def first_audible(samples: NDArray[np.float32], rate: int) -> int | None:
    """Index of the first audible sample (the start of an answer on the speaker), None when silent throughout."""
    span = sound_span(samples, rate)
    return None if span is None else span[0]


def last_voiced(samples: NDArray[np.float32], rate: int) -> int | None:
    """Index of the last voiced sample (the end of a question), None when silent throughout."""
    span = sound_span(samples, rate)
    return None if span is None else span[1]


def pauses_ms(samples: NDArray[np.float32], rate: int, window_ms: float = WINDOW_MS) -> list[float]:
    """Silent gaps inside the sound, in ms, when at least PAUSE_MIN_MS long.

    Measured sample to sample: from the last sample at the audible level before the gap to the first one after.
    """
    size, starts = _loud_windows(samples, rate, window_ms)
    pauses: list[float] = []
    for index in np.flatnonzero(np.diff(starts) > size):  # loud windows that neither overlap nor touch
        end = _last_loud_sample(samples, int(starts[index]), size)
        start = _first_loud_sample(samples, int(starts[index + 1]), size)
        gap = (start - end - 1) * 1000 / rate
        if gap >= PAUSE_MIN_MS:
            pauses.append(float(gap))
    return pauses


def trim(samples: NDArray[np.float32], rate: int) -> NDArray[np.float32]:
    """The samples from the first to the last audible one (empty when nothing is audible)."""
    span = sound_span(samples, rate)
    return samples[:0] if span is None else samples[span[0]:span[1] + 1]


class _Levels(Protocol):
    def recent_dbfs(self, seconds: float = 0.25) -> float: ...


class QuietWatch:
    """When a running recording (the speaker's monitor) last had sound: the benches wait on it between questions.

    `quiet(now)` must be called often (the benches' pump does, every round): it is what notices the sound.
    """

    def __init__(self, recording: _Levels, quiet_s: float, now: float) -> None:
        self.recording = recording
        self.quiet_s = quiet_s
        self.since = now
        """The last time sound was heard (or the start)."""

    def quiet(self, now: float) -> bool:
        """True once nothing audible has been heard for quiet_s."""
        if self.recording.recent_dbfs(0.1) > AUDIBLE_DBFS:
            self.since = now
        return now - self.since >= self.quiet_s
