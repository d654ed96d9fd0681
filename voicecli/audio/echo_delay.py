"""How long after it was played the speaker's audio reaches the microphone: GCC-PHAT over a window of both signals.

Why estimate at all when the timestamps are known: the reference is stamped with its DAC time and a capture block
with its callback time, but between them lie the acoustic path, the input buffer and the sound server, none of
which PortAudio reports reliably (PulseAudio's ALSA plugin reports tens of ms off). The echo canceller needs the
reference no later than the echo it explains, so the bulk delay is measured from the signals themselves.

Why GCC-PHAT: whitening the cross-spectrum makes the correlation peak as sharp as the bandwidth allows (a sample
or two at 16 kHz for speech) instead of as broad as the speech's own autocorrelation, and the strongest path
(the direct sound) wins over the room's reflections. The regularised weighting keeps empty bands (below the
speaker's cut-off, above the voice) from contributing noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE

__all__ = ["MIN_CLARITY", "DelayEstimate", "estimate_delay", "fft_size"]

Audio = NDArray[np.float32]

MIN_CLARITY: Final = 12.0
"""Peak over the correlation's RMS across the searched lags below which an estimate is not trusted. Measured on the
synthetic mixtures of tests/audio/test_echo_delay.py: echo present >= 20 (0 and +6 dB over a near-end voice,
double talk included), no echo (unrelated signals) < 6."""


@dataclass(frozen=True)
class DelayEstimate:
    """The capture lags the reference by `lag` samples (at `rate`); `clarity` says how distinct the peak was."""

    lag: int
    clarity: float
    rate: int = SPEECH_RATE

    @property
    def seconds(self) -> float:
        return self.lag / self.rate

    @property
    def clear(self) -> bool:
        return self.clarity >= MIN_CLARITY


def fft_size(n: int) -> int:
    """The smallest 5-smooth size (2^a 3^b 5^c) of at least `n`: numpy's FFT is fastest there, and the next power of
    two is not (measured for the canceller's window, 40,000 samples: 5.6 ms per correlation at 40,000, 14.4 ms at
    65,536; the canceller estimates five times a second while the far end plays)."""
    best = 1 << max(0, (n - 1).bit_length())
    power5 = 1
    while power5 < best:
        power35 = power5
        while power35 < best:
            size = power35
            while size < n:
                size *= 2
            best = min(best, size)
            power35 *= 3
        power5 *= 5
    return best


def estimate_delay(capture: Audio, reference: Audio, max_lag: int, band_hz: tuple[float, float] = (200.0, 6000.0),
                   rate: int = SPEECH_RATE) -> DelayEstimate | None:
    """The lag in [0, max_lag] samples at which `capture` best matches `reference`; None if the reference is silent.

    `reference` covers the same time as `capture` plus `max_lag` samples before it: reference[max_lag + k] was
    played at the time capture[k] was recorded, so an echo delayed by L samples matches reference[max_lag + k - L].
    """
    n = len(capture)
    if len(reference) != n + max_lag:
        raise ValueError(f"reference must be {n + max_lag} samples (capture + max_lag), not {len(reference)}")
    if not np.any(reference) or not np.any(capture):
        return None
    nfft = fft_size(n + len(reference))
    cap = np.fft.rfft(capture.astype(np.float64), nfft)
    ref = np.fft.rfft(reference.astype(np.float64), nfft)
    cross = ref * np.conj(cap)
    magnitude = np.abs(cross)
    freqs = np.fft.rfftfreq(nfft, 1 / rate)
    weight = (freqs >= band_hz[0]) & (freqs <= band_hz[1])
    cross = np.where(weight, cross / (magnitude + 1e-3 * float(magnitude.max())), 0)
    corr = np.fft.irfft(cross, nfft)[: max_lag + 1]  # corr[m] = sum_k capture[k] * reference[k + m]
    m = int(np.argmax(corr))
    rms = float(np.sqrt(np.mean(np.square(corr)))) or 1e-12
    return DelayEstimate(lag=max_lag - m, clarity=float(corr[m]) / rms, rate=rate)
