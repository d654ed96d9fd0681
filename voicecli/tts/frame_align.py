"""Re-cut an audio byte stream whose pieces end anywhere into pieces that each decode on their own.

SageMaker's InvokeEndpointWithResponseStream delivers PayloadParts whose boundaries have nothing to do with the
audio: a part can end in the middle of an MP3 frame, or in the middle of a 16-bit sample. The player expects what
the WebSocket gives it (whole MP3 frames, whole samples), so the stream transport passes every part through one of
these aligners, which hold back the incomplete tail until the next part completes it.
"""

from __future__ import annotations

from typing import Protocol

from voicecli.protocol import mp3_frame_length


class Aligner(Protocol):
    def feed(self, data: bytes) -> bytes:
        """Bytes that now form whole units (possibly empty); the rest is kept for the next call."""

    def flush(self) -> int:
        """End of stream: how many trailing bytes were left over (an incomplete unit, discarded)."""


class Mp3Aligner:
    """Whole MPEG Layer III frames out, whatever the cuts in. Bytes that are not frames (e.g. a tag) are skipped."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.skipped = 0
        """Bytes dropped while looking for a frame header (0 for the endpoint's own streams)."""

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = bytearray()
        position = 0
        buffer = self._buffer
        while len(buffer) - position >= 4:
            try:
                length = mp3_frame_length(bytes(buffer[position : position + 4]))
            except ValueError:
                next_sync = buffer.find(0xFF, position + 1)
                end = len(buffer) if next_sync < 0 else next_sync
                self.skipped += end - position
                position = end
                continue
            if len(buffer) - position < length:
                break
            out += buffer[position : position + length]
            position += length
        del buffer[:position]
        return bytes(out)

    def flush(self) -> int:
        left = len(self._buffer)
        self._buffer.clear()
        return left


class PcmAligner:
    """Whole 16-bit samples out: an odd byte waits for its partner."""

    def __init__(self) -> None:
        self._odd = b""

    def feed(self, data: bytes) -> bytes:
        data = self._odd + data
        cut = len(data) - len(data) % 2
        self._odd = data[cut:]
        return data[:cut]

    def flush(self) -> int:
        left = len(self._odd)
        self._odd = b""
        return left


def aligner_for(audio_format: str) -> Aligner:
    return Mp3Aligner() if audio_format == "mp3" else PcmAligner()
