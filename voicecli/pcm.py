"""The PCM16 audio path: little-endian 16-bit payload bytes, split anywhere, to float32 samples.

Why a class and not one ``np.frombuffer`` call: network chunks need not end on a sample (or a frame of
``channels`` samples), so the odd tail of one chunk must be carried into the next.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["Pcm16Decoder", "pcm16_to_float32"]

_SCALE = np.float32(1.0 / 32768.0)


def pcm16_to_float32(data: bytes | bytearray | memoryview) -> NDArray[np.float32]:
    """Whole-sample PCM16LE bytes to float32 in [-1, 1)."""
    if len(data) % 2:
        raise ValueError(f"PCM16 payload of {len(data)} bytes is not a whole number of samples")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) * _SCALE


class Pcm16Decoder:
    """Incremental PCM16LE decoder: ``feed()`` returns the samples completed by each chunk (interleaved)."""

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

    def feed(self, chunk: bytes | bytearray | memoryview) -> NDArray[np.float32]:
        data = self._carry + bytes(chunk) if self._carry else bytes(chunk)
        whole = len(data) - len(data) % self._frame_bytes
        self._carry = data[whole:]
        return pcm16_to_float32(data[:whole])

    def flush(self) -> NDArray[np.float32]:
        """End of stream: a trailing partial frame is dropped (it cannot be played); returns nothing more."""
        self._carry = b""
        return np.zeros(0, dtype=np.float32)
