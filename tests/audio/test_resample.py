"""The shared streaming resampler: a stream cut into blocks comes out as the whole signal would, at the new rate."""

from __future__ import annotations

import numpy as np
import pytest

from voicecli.audio.resample import StreamResampler, resample


def _tone(rate: int, seconds: float = 1.0, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


@pytest.mark.parametrize(("rate_in", "rate_out"), [(24_000, 48_000), (24_000, 16_000), (44_100, 16_000)])
def test_blocks_resample_to_the_tone_at_the_new_rate_without_delay(rate_in: int, rate_out: int) -> None:
    source = _tone(rate_in)
    resampler = StreamResampler(rate_in, rate_out)
    out = np.concatenate([resampler.process(source[i : i + 333]) for i in range(0, source.size, 333)]
                         + [resampler.flush()])
    assert out.dtype == np.float32 and out.size == rate_out  # one second in, one second out, tail flushed
    ideal = _tone(rate_out)
    assert np.max(np.abs(out[200:-200] - ideal[200:-200])) < 1e-3  # no delay, no aliasing of a 440 Hz tone


def test_stereo_keeps_its_shape_and_a_stream_starts_clean_after_flush() -> None:
    stereo = np.stack([_tone(24_000), -_tone(24_000)], axis=1)
    resampler = StreamResampler(24_000, 48_000, channels=2)
    first = np.concatenate([resampler.process(stereo), resampler.flush(ndim=2)])
    again = np.concatenate([resampler.process(stereo), resampler.flush(ndim=2)])
    assert first.shape == (48_000, 2) and np.array_equal(first, again)
    assert np.allclose(first[:, 0], -first[:, 1])


def test_same_rate_is_untouched_and_more_than_two_channels_is_refused() -> None:
    tone = _tone(16_000)
    assert np.array_equal(resample(tone, 16_000, 16_000), tone)
    with pytest.raises(ValueError, match="mono and stereo"):
        StreamResampler(24_000, 48_000, channels=6)
