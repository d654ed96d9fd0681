"""MPEG Layer III frames: the one header parser and the one frame splitter that client, server and bench share.

The endpoint sends MP3 as whole frames (every WebSocket binary frame starts with the sync byte); transports that
cut the stream anywhere (SageMaker's response stream, chunked HTTP) re-align it here; the streaming decoder walks
its stream's frames here (with the stricter synchronisation a decoder needs, see ``Mp3FrameSplitter``); the server's
encoder and the HTTP transports cut a byte string into frames here. Only Layer III is parsed (MPEG-1, 2 and 2.5):
the endpoint never sends anything else. Free-format streams (bitrate index 0) are rejected.

Tables: ISO 11172-3 / 13818-3. Pure Python and numpy-free, so the endpoint container imports it without the
client's audio libraries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = [
    "HEADER_BYTES",
    "Frame",
    "FrameHeader",
    "Mp3FrameSplitter",
    "Mp3SyncError",
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


class Mp3SyncError(ValueError):
    """More bytes without a usable frame header than a splitter's ``max_garbage`` allows."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One whole frame cut from a stream, with its parsed header."""

    data: bytes
    header: FrameHeader
    after_gap: bool
    """Sync was (re)gained at this frame after skipped bytes: a decoder restarts from a reset state here."""


_START, _LOCKED, _SEARCHING = range(3)
_ID3_HEADER_BYTES = 10


class Mp3FrameSplitter:
    """Whole MPEG Layer III frames out, whatever the cuts in. Bytes that are not frames (e.g. a tag) are skipped.

    ``feed`` returns the bytes that now form whole frames (what a transport passes on as one chunk); ``frames`` the
    same as one ``bytes`` per frame; ``split`` the frames with their headers (what a decoder needs).

    By default any valid header starts a frame: enough to re-align the endpoint's own stream. ``strict=True`` is
    the synchronisation of dr_mp3, the decoder miniaudio runs, so that a decoder cuts any stream into exactly the
    frames a whole-file decode sees: an ID3v2 tag at the start is skipped whole; while in sync, only a header
    compatible with the one sync was gained on continues the stream (anything else loses sync); a header found
    after lost sync or garbage counts only once the header after its frame confirms it (or its frame ends the
    stream); and more than ``max_garbage`` bytes in a row without that raises ``Mp3SyncError``.
    """

    def __init__(self, *, strict: bool = False, max_garbage: int | None = None) -> None:
        self._buffer = bytearray()
        self._strict = strict
        self._max_garbage = max_garbage
        self._state = _START
        self._lock: FrameHeader | None = None  # the header sync was gained on
        self._gap = False  # the next frame is the first after lost sync (or after garbage at the start)
        self._garbage_run = 0
        self._fed = 0
        self.skipped = 0
        """Bytes dropped while looking for a frame header, ID3v2 tags included (0 for the endpoint's own streams)."""
        self.resyncs = 0
        """Times sync was lost after a frame."""
        self.longest_gap = 0
        """The longest run of skipped bytes before a frame."""

    @property
    def in_sync(self) -> bool:
        """Whether the bytes kept back continue the stream's last frame (rather than being skipped garbage)."""
        return self._state == _LOCKED

    def split(self, data: bytes | bytearray | memoryview, final: bool = False) -> Iterator[Frame]:
        """The frames completed by `data`, in stream order, each cut off the buffer as it is yielded (lazily, so that
        a decoder checking each meets a stream's errors in order); the rest is kept for the next call. ``final``:
        nothing follows (a strict splitter then accepts a last frame that nothing confirms, and drops an incomplete
        ID3v2 tag)."""
        self._buffer += data
        self._fed += len(data)
        return self._cut(final)

    def _cut(self, final: bool) -> Iterator[Frame]:
        buffer = self._buffer
        while True:
            if self._state == _START:
                if self._strict:
                    tag = self._skip_id3_tag(final)
                    if tag is None:
                        return
                    if tag:
                        continue
                if len(buffer) < HEADER_BYTES:
                    return
                header = parse_header(buffer)
                if header is None:
                    self._state = _SEARCHING
                    continue
                if len(buffer) < header.length:
                    return
                self._state = _LOCKED
                self._lock = header
                yield self._take(header)
            elif self._state == _LOCKED:
                if len(buffer) < HEADER_BYTES:
                    return
                header = parse_header(buffer)
                assert self._lock is not None
                if header is None or (self._strict and not header.compatible(self._lock)):
                    self._state = _SEARCHING  # lost sync: whatever follows decodes from a reset state
                    self.resyncs += 1
                    continue
                if len(buffer) < header.length:
                    return
                yield self._take(header)
            else:
                found = self._search(final)
                if found is None:
                    return
                self._state = _LOCKED
                self._lock = found
                self._gap = True

    def frames(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The frames completed by `data`, one per item; the rest is kept for the next call."""
        return [frame.data for frame in self.split(data)]

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """The bytes that now form whole frames (possibly empty); the rest is kept for the next call."""
        return b"".join(self.frames(data))

    def flush(self) -> int:
        """End of stream: how many trailing bytes were left over (an incomplete frame, discarded)."""
        left = len(self._buffer)
        self._buffer.clear()
        return left

    def _skip_id3_tag(self, final: bool) -> bool | None:
        """At the start of a strict stream: skip an ID3v2 tag. True when one was skipped (there may be another),
        False when there is none, None when more bytes must come first."""
        buffer = self._buffer
        if len(buffer) < _ID3_HEADER_BYTES and b"ID3".startswith(bytes(buffer[:3])) and not final:
            return None  # could still be an ID3v2 tag: wait for its 10-byte header
        if buffer[:3] != b"ID3" or len(buffer) < _ID3_HEADER_BYTES:
            return False
        size = (buffer[6] & 0x7F) << 21 | (buffer[7] & 0x7F) << 14 | (buffer[8] & 0x7F) << 7 | (buffer[9] & 0x7F)
        size += _ID3_HEADER_BYTES + (_ID3_HEADER_BYTES if buffer[5] & 0x10 else 0)  # header, body, footer
        if len(buffer) < size:
            if final:  # a tag cut short ends the stream
                self.skipped += len(buffer)
                buffer.clear()
            return None
        del buffer[:size]
        self.skipped += size
        return True

    def _search(self, final: bool) -> FrameHeader | None:
        """Skip bytes up to the next header that starts a frame (strict: one that is confirmed); None when the
        buffer holds none yet."""
        buffer = self._buffer
        found: FrameHeader | None = None
        position = buffer.find(0xFF)  # every header starts with the sync byte
        while 0 <= position <= len(buffer) - HEADER_BYTES:
            header = parse_header(buffer, position)
            if header is not None:
                if not self._strict:
                    found = header
                    break
                follower = position + header.length
                if follower + HEADER_BYTES <= len(buffer):
                    confirmation = parse_header(buffer, follower)
                    if confirmation is not None and confirmation.compatible(header):
                        found = header
                        break
                elif final and follower == len(buffer):
                    found = header
                    break
                elif not final:
                    break  # wait for the bytes that confirm this candidate
            position = buffer.find(0xFF, position + 1)
        if position < 0 or position > len(buffer) - HEADER_BYTES:  # no candidate: keep what may begin a header
            if self._strict or len(buffer) < HEADER_BYTES:
                position = max(0, len(buffer) - (HEADER_BYTES - 1))  # the last 3 bytes
            elif position < 0:
                position = len(buffer)  # (lenient) no sync byte at all
        self._skip(position)
        return found

    def _skip(self, count: int) -> None:
        if count <= 0:
            return
        del self._buffer[:count]
        self.skipped += count
        self._garbage_run += count
        if self._max_garbage is not None and self._garbage_run > self._max_garbage:
            raise Mp3SyncError(
                f"no valid MP3 frame header in {self._garbage_run} consecutive bytes "
                f"(stream offset ~{self._fed - len(self._buffer)})"
            )

    def _take(self, header: FrameHeader) -> Frame:
        data = bytes(self._buffer[: header.length])
        del self._buffer[: header.length]
        if self._garbage_run:
            self.longest_gap = max(self.longest_gap, self._garbage_run)
            self._garbage_run = 0
        frame = Frame(data, header, after_gap=self._gap)
        self._gap = False
        return frame
