"""Delay estimation: GCC-PHAT finds the echo's delay in speech through a room, with and without double talk."""

from __future__ import annotations

import numpy as np
import pytest

from tests.audio.echo_mixtures import mixture, speech
from voicecli.audio.echo_delay import estimate_delay, fft_size
from voicecli.audio.rates import SPEECH_RATE

MAX_LAG = SPEECH_RATE // 2


def _estimate(capture: np.ndarray, far: np.ndarray, start_s: float, seconds: float = 1.0):  # type: ignore[no-untyped-def]
    start, n = round(start_s * SPEECH_RATE), round(seconds * SPEECH_RATE)
    return estimate_delay(capture[start : start + n], far[start - MAX_LAG : start + n], MAX_LAG)


@pytest.mark.parametrize("delay_ms", [20, 45, 80, 120])
@pytest.mark.parametrize("echo_db", [0.0, 6.0])
def test_delay_found_within_a_millisecond(delay_ms: int, echo_db: float) -> None:
    mix = mixture(speech("q01.wav", "q03.wav"), speech("q02.wav"), delay_ms / 1000, echo_db, near_at_s=1.0)
    estimate = _estimate(mix.capture, mix.far, 1.2)  # the window holds double talk
    assert estimate is not None and estimate.clear, estimate
    assert abs(estimate.seconds * 1000 - delay_ms) <= 1.0, estimate


def test_unrelated_signals_give_no_clear_delay() -> None:
    far = speech("q01.wav", "q03.wav")
    other = speech("q04.wav", "q05.wav")[: len(far)]
    estimate = _estimate(other, far, 1.0)
    assert estimate is not None and not estimate.clear, estimate


def test_silent_reference_gives_no_estimate() -> None:
    capture = speech("q02.wav")
    assert _estimate(capture, np.zeros_like(capture), 0.6) is None


def test_reference_length_is_checked() -> None:
    with pytest.raises(ValueError, match="capture \\+ max_lag"):
        estimate_delay(np.ones(100, np.float32), np.ones(100, np.float32), 10)


def test_fft_size_is_the_next_5_smooth_size() -> None:
    def smooth(x: int) -> bool:
        for p in (2, 3, 5):
            while x % p == 0:
                x //= p
        return x == 1

    for n in [*range(1, 300), 40_000, 40_001, 65_535, 123_457]:
        size = fft_size(n)
        assert size >= n and smooth(size) and not any(smooth(m) for m in range(n, size)), n
