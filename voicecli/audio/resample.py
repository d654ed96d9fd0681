"""Streaming sample-rate conversion with a library resampler (FFmpeg's libswresample, through PyAV).

One resampler for every rate change in voicecli: the microphone's device rate to Whisper's 16 kHz, the endpoint's
24 kHz to an output device that refuses it, a WAV file read with --wav. A stream (one answer, one microphone) is
one continuous signal, so the filter state carries from one block to the next; ``flush`` returns the few samples
the filter still holds at the end of the stream. PyAV is imported when the first resampler is made: the endpoint
container, which imports this package's frame splitter, does not install it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voicecli.audio.pcm import Samples

__all__ = ["StreamResampler", "resample"]

_LAYOUTS = {1: "mono", 2: "stereo"}


class StreamResampler:
    """float32 at `in_rate` in, float32 at `out_rate` out; 1-D (mono) or (frames, channels) in, the same shape out."""

    def __init__(self, in_rate: int, out_rate: int, channels: int = 1) -> None:
        if channels not in _LAYOUTS:
            raise ValueError(f"{channels} channels: only mono and stereo are resampled")
        import av

        self._av: Any = av
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.channels = channels
        self._resampler: Any = None
        self.reset()

    def reset(self) -> None:
        """Start a new stream: forget the filter state of the previous one."""
        self._resampler = self._av.AudioResampler(format="flt", layout=_LAYOUTS[self.channels], rate=self.out_rate)

    def process(self, samples: Samples) -> Samples:
        if self.in_rate == self.out_rate or samples.shape[0] == 0:
            return samples
        packed = np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1)
        frame = self._av.AudioFrame.from_ndarray(packed, format="flt", layout=_LAYOUTS[self.channels])
        frame.sample_rate = self.in_rate
        return self._shaped(self._resampler.resample(frame), samples.ndim)

    def flush(self, ndim: int = 1) -> Samples:
        """End of the stream: what the filter still holds (a few ms), then a fresh state for the next stream."""
        if self.in_rate == self.out_rate:
            return np.zeros((0,) if ndim == 1 else (0, self.channels), np.float32)
        tail = self._shaped(self._resampler.resample(None), ndim)
        self.reset()
        return tail

    def _shaped(self, frames: list[Any], ndim: int) -> Samples:
        out = [f.to_ndarray().reshape(-1) for f in frames]
        flat = np.concatenate(out).astype(np.float32, copy=False) if out else np.zeros(0, np.float32)
        return flat if ndim == 1 else flat.reshape(-1, self.channels)


def resample(samples: Samples, in_rate: int, out_rate: int) -> Samples:
    """A whole mono signal at another rate."""
    resampler = StreamResampler(in_rate, out_rate)
    return np.concatenate([resampler.process(samples), resampler.flush()])
