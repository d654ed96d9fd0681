"""MPEG Layer III frames: the one header parser and the one frame splitter that client, server and bench share.

The endpoint sends MP3 as whole frames (every WebSocket binary frame starts with the sync byte); transports that
cut the stream anywhere (SageMaker's response stream, chunked HTTP) re-align it here; the streaming decoder, the
server's encoder and the HTTP transports cut a byte string into frames here. Only Layer III is parsed (MPEG-1, 2
and 2.5): the endpoint never sends anything else. Free-format streams (bitrate index 0) are rejected.

Tables: ISO 11172-3 / 13818-3. Pure Python and numpy-free, so the endpoint container imports it without the
client's audio libraries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "HEADER_BYTES",
    "FrameHeader",
    "Mp3FrameSplitter",
    "frame_length",
    "frame_slices",
    "parse_header",
    "split_frames",
]

HEADER_BYTES: Final = 4

_BITRATES_KBPS: Final = {
    True: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),  # MPEG-1 Layer III
    False: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),  # MPEG-2/2.5 Layer III
}
_SAMPLE_RATES: Final = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """The fields of a Layer III frame header that decide how long the frame is and how it decodes."""

    raw: bytes
    version: int  # 3 = MPEG-1, 2 = MPEG-2, 0 = MPEG-2.5 (the header's version bits)
    crc: bool
    bitrate_kbps: int
    sample_rate: int
    padding: int
    channels: int
    length: int  # whole frame, header included

    @property
    def mpeg1(self) -> bool:
        return self.version == 3

    @property
    def samples_per_frame(self) -> int:
        return 1152 if self.mpeg1 else 576

    @property
    def side_info_len(self) -> int:
        if self.mpeg1:
            return 17 if self.channels == 1 else 32
        return 9 if self.channels == 1 else 17

    @property
    def main_data_offset(self) -> int:
        """Where the main data (the part that feeds the bit reservoir) starts within the frame."""
        return HEADER_BYTES + (2 if self.crc else 0) + self.side_info_len

    def compatible(self, other: FrameHeader) -> bool:
        """dr_mp3's header comparison: same version, layer and sample rate (bitrate and padding may change)."""
        return (self.raw[1] ^ other.raw[1]) & 0xFE == 0 and (self.raw[2] ^ other.raw[2]) & 0x0C == 0


def parse_header(data: bytes | bytearray | memoryview, pos: int = 0) -> FrameHeader | None:
    """Parse a Layer III header at ``data[pos:pos+4]``; None if those bytes are not a usable header."""
    if len(data) - pos < HEADER_BYTES:
        return None
    b0, b1, b2, b3 = data[pos], data[pos + 1], data[pos + 2], data[pos + 3]
    if b0 != 0xFF or b1 & 0xE0 != 0xE0:
        return None
    version = (b1 >> 3) & 3
    layer = (b1 >> 1) & 3
    br_idx = b2 >> 4
    sr_idx = (b2 >> 2) & 3
    if version == 1 or layer != 1 or br_idx in (0, 15) or sr_idx == 3:
        return None
    mpeg1 = version == 3
    bitrate = _BITRATES_KBPS[mpeg1][br_idx]
    sample_rate = _SAMPLE_RATES[version][sr_idx]
    padding = (b2 >> 1) & 1
    spf = 1152 if mpeg1 else 576
    length = spf * bitrate * 125 // sample_rate + padding
    return FrameHeader(
        raw=bytes((b0, b1, b2, b3)),
        version=version,
        crc=not (b1 & 1),
        bitrate_kbps=bitrate,
        sample_rate=sample_rate,
        padding=padding,
        channels=1 if (b3 >> 6) == 3 else 2,
        length=length,
    )


def frame_length(header: bytes | bytearray | memoryview) -> int:
    """Length in bytes of the Layer III frame whose 4-byte header starts `header`. Raises ValueError."""
    parsed = parse_header(header)
    if parsed is None:
        if len(header) < HEADER_BYTES or header[0] != 0xFF or (header[1] & 0xE0) != 0xE0:
            raise ValueError("no MPEG frame sync")
        raise ValueError("not a Layer III frame header this decoder supports")
    return parsed.length


def split_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Whole frames at the start of `buffer`, and the incomplete rest. Raises ValueError on lost sync (for a stream
    that must be well formed, such as the encoder's own output)."""
    frames: list[bytes] = []
    offset = 0
    while len(buffer) - offset >= HEADER_BYTES:
        length = frame_length(buffer[offset : offset + HEADER_BYTES])
        if len(buffer) - offset < length:
            break
        frames.append(buffer[offset : offset + length])
        offset += length
    return frames, buffer[offset:]


def frame_slices(data: bytes, size: int) -> list[bytes]:
    """Cut a whole MP3 into slices of whole frames of about `size` bytes (so each slice decodes as the WebSocket's
    frames do). Whatever follows the last frame (a partial frame, a tag) stays in the last slice."""
    slices: list[bytes] = []
    start = position = 0
    while position + HEADER_BYTES <= len(data):
        try:
            position += frame_length(data[position : position + HEADER_BYTES])
        except ValueError:
            break
        if position - start >= size:
            slices.append(data[start:position])
            start = position
    if start < len(data):
        slices.append(data[start:])
    return slices


class Mp3FrameSplitter:
    """Whole MPEG Layer III frames out, whatever the cuts in. Bytes that are not frames (e.g. a tag) are skipped.

    ``feed`` returns the bytes that now form whole frames (what a transport passes on as one chunk); ``frames`` the
    same as one ``bytes`` per frame (what a decoder needs).
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.skipped = 0
        """Bytes dropped while looking for a frame header (0 for the endpoint's own streams)."""

    def frames(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The frames completed by `data`, one per item; the rest is kept for the next call."""
        self._buffer += data
        out: list[bytes] = []
        position = 0
        buffer = self._buffer
        while len(buffer) - position >= HEADER_BYTES:
            header = parse_header(buffer, position)
            if header is None:
                next_sync = buffer.find(0xFF, position + 1)
                end = len(buffer) if next_sync < 0 else next_sync
                self.skipped += end - position
                position = end
                continue
            if len(buffer) - position < header.length:
                break
            out.append(bytes(buffer[position : position + header.length]))
            position += header.length
        del buffer[:position]
        return out

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """The bytes that now form whole frames (possibly empty); the rest is kept for the next call."""
        return b"".join(self.frames(data))

    def flush(self) -> int:
        """End of stream: how many trailing bytes were left over (an incomplete frame, discarded)."""
        left = len(self._buffer)
        self._buffer.clear()
        return left
