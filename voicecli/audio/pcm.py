"""PCM16 audio: little-endian 16-bit payload bytes, split anywhere, to float32 samples.

Why a carrier and not one ``np.frombuffer`` call: network chunks need not end on a sample (a SageMaker
PayloadPart, a chunked HTTP body, a pcm16 stream split at an odd offset), so the odd tail of one chunk must be
carried into the next. ``Pcm16Aligner`` is the one place that does so; ``Pcm16Decoder`` turns what it releases into
samples.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Pcm16Aligner", "Pcm16Decoder", "Samples", "pcm16_to_float32"]

Samples = NDArray[np.float32]
"""Decoded audio everywhere in voicecli: float32 in [-1, 1], mono at the endpoint's 24 kHz unless said otherwise."""

_SCALE = np.float32(1.0 / 32768.0)


def pcm16_to_float32(data: bytes | bytearray | memoryview) -> Samples:
    """Whole-sample PCM16LE bytes to float32 in [-1, 1)."""
    if len(data) % 2:
        raise ValueError(f"PCM16 payload of {len(data)} bytes is not a whole number of samples")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) * _SCALE


class Pcm16Aligner:
    """Whole PCM16 frames (``channels`` samples) out, whatever the cuts in: a partial frame waits for the rest."""

    def __init__(self, channels: int = 1) -> None:
        if channels < 1:
            raise ValueError("channels must be >= 1")
        self.channels = channels
        self._frame_bytes = 2 * channels
        self._carry = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes held back because they do not yet make a whole frame."""
        return len(self._carry)

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """The bytes that now form whole frames (possibly none); the rest is kept for the next call."""
        joined = self._carry + bytes(data) if self._carry else bytes(data)
        whole = len(joined) - len(joined) % self._frame_bytes
        self._carry = joined[whole:]
        return joined[:whole]

    def flush(self) -> int:
        """End of stream: how many trailing bytes were left over (a partial frame, which cannot be played)."""
        left = len(self._carry)
        self._carry = b""
        return left


class Pcm16Decoder:
    """Incremental PCM16LE decoder: ``feed()`` returns the samples completed by each chunk (interleaved)."""

    def __init__(self, channels: int = 1) -> None:
        self._aligner = Pcm16Aligner(channels)
        self.channels = channels

    @property
    def pending_bytes(self) -> int:
        """Bytes held back because they do not yet make a whole frame."""
        return self._aligner.pending_bytes

    def feed(self, chunk: bytes | bytearray | memoryview) -> Samples:
        return pcm16_to_float32(self._aligner.feed(chunk))

    def flush(self) -> Samples:
        """End of stream: a trailing partial frame is dropped (it cannot be played); returns nothing more."""
        self._aligner.flush()
        return np.zeros(0, dtype=np.float32)
