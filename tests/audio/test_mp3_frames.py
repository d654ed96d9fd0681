"""The MP3 frame header parser and splitter: re-alignment of a stream cut at arbitrary byte offsets (what
SageMaker's response stream does to PayloadParts), frame lengths, and cutting a whole MP3 into frames."""

from __future__ import annotations

import itertools

import lameenc
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicecli.audio.mp3_frames import Mp3FrameSplitter, Mp3SyncError, frame_length, frame_slices, split_frames


def _mp3() -> bytes:
    """Half a second of a tone as MPEG-2 Layer III 24 kHz mono: the endpoint's own format."""
    encoder = lameenc.Encoder()
    encoder.set_bit_rate(64)
    encoder.set_in_sample_rate(24_000)
    encoder.set_channels(1)
    encoder.set_quality(7)
    tone = (np.sin(np.arange(12_000) * 2 * np.pi * 440 / 24_000) * 8000).astype("<i2")
    return bytes(encoder.encode(tone.tobytes()) + encoder.flush())


MP3 = _mp3()


def _whole_frames(data: bytes) -> bool:
    position = 0
    while position < len(data):
        position += frame_length(data[position : position + 4])
    return position == len(data)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=40))
def test_mp3_cut_anywhere_comes_out_as_whole_frames_and_unchanged(cuts: list[int]) -> None:
    aligner = Mp3FrameSplitter()
    out = [aligner.feed(part) for part in _cut(MP3, cuts)]
    assert all(_whole_frames(piece) for piece in out if piece)
    assert b"".join(out) == MP3
    assert aligner.flush() == 0 and aligner.skipped == 0


def test_mp3_truncated_tail_is_held_back_and_reported() -> None:
    aligner = Mp3FrameSplitter()
    first = frame_length(MP3[:4])
    assert aligner.feed(MP3[: first + 10]) == MP3[:first]
    assert aligner.flush() == 10


def test_mp3_junk_before_a_frame_is_skipped() -> None:
    aligner = Mp3FrameSplitter()
    assert aligner.feed(b"ID3junk" + MP3) == MP3
    assert aligner.skipped == 7


def test_mp3_frame_length_of_lame_24khz_64kbps() -> None:
    # MPEG-2 Layer III, 64 kbps, 24 kHz, no padding: 72 * 64000 / 24000 = 192 bytes (576 samples, 24 ms).
    assert frame_length(bytes([0xFF, 0xF3, 0x84, 0xC4])) == 192
    assert frame_length(bytes([0xFF, 0xF3, 0x86, 0xC4])) == 193  # padding bit
    assert frame_length(bytes([0xFF, 0xFB, 0x90, 0x64])) == 417  # MPEG-1 128 kbps 44.1 kHz
    with pytest.raises(ValueError):
        frame_length(b"{\"a")


def test_frame_slices_keep_every_byte() -> None:
    frame = bytes([0xFF, 0xF3, 0x84, 0xC4]) + bytes(188)  # MPEG-2 L3 64 kbps 24 kHz: 192 bytes
    assert frame_length(frame) == 192
    data = frame * 100
    slices = frame_slices(data, size=1000)
    assert b"".join(slices) == data and all(len(s) % 192 == 0 for s in slices)


def test_split_frames_keeps_the_partial_tail() -> None:
    data = MP3
    frames, rest = split_frames(data[:500])
    assert [len(f) for f in frames] == [192, 192] and rest == data[384:500]
    with pytest.raises(ValueError):
        split_frames(b"\x00" * 8)


def _frames_of(splitter: Mp3FrameSplitter, *parts: bytes, final: bool = False) -> list[tuple[int, bool]]:
    """(length, after_gap) of each frame the parts complete."""
    out = [(len(f.data), f.after_gap) for part in parts for f in splitter.split(part)]
    if final:
        out += [(len(f.data), f.after_gap) for f in splitter.split(b"", final=True)]
    return out


def test_strict_skips_a_whole_id3v2_tag_the_lenient_one_would_misread() -> None:
    body = bytes([0xFF, 0xF3, 0x84, 0xC4]) + bytes(6)  # looks like a frame header inside the tag
    tag = b"ID3\x03\x00\x00" + bytes([0, 0, 0, len(body)]) + body
    strict = Mp3FrameSplitter(strict=True)
    assert [f.data for f in strict.split(tag + MP3)][:3] == [MP3[:192], MP3[192:384], MP3[384:576]]
    assert strict.skipped == len(tag)
    lenient = Mp3FrameSplitter()
    assert lenient.frames(tag + MP3)[0] != MP3[:192]  # it took the tag's look-alike for a frame


def test_strict_takes_a_frame_after_garbage_only_once_the_next_header_confirms_it() -> None:
    garbage = b"\x00\x01garbage\xff\x00"
    strict = Mp3FrameSplitter(strict=True)
    assert _frames_of(strict, garbage + MP3[:192]) == []  # a header after garbage: maybe only a look-alike
    assert _frames_of(strict, MP3[192:196]) == [(192, True)]  # confirmed: decoding restarts from a reset state
    assert _frames_of(strict, MP3[196:384]) == [(192, False)]
    assert strict.skipped == len(garbage) and strict.longest_gap == len(garbage) and strict.in_sync
    lenient = Mp3FrameSplitter()
    assert lenient.frames(garbage + MP3[:192]) == [MP3[:192]]
    last = Mp3FrameSplitter(strict=True)  # unless it ends the stream exactly
    assert _frames_of(last, garbage + MP3[:192], final=True) == [(192, True)]


def test_strict_loses_sync_on_a_header_of_another_format() -> None:
    other = bytes([0xFF, 0xFB, 0x90, 0x64]) + bytes(413)  # MPEG-1 44.1 kHz: not this stream's format
    strict = Mp3FrameSplitter(strict=True)
    assert _frames_of(strict, MP3[:384] + other + other + other[:4]) == [(192, False), (192, False), (417, True),
                                                                         (417, False)]
    assert strict.resyncs == 1 and strict.skipped == 0
    lenient = Mp3FrameSplitter()
    assert [len(f) for f in lenient.frames(MP3[:384] + other + other)] == [192, 192, 417, 417]
    assert lenient.resyncs == 0


def test_strict_gives_up_on_endless_garbage() -> None:
    strict = Mp3FrameSplitter(strict=True, max_garbage=1000)
    with pytest.raises(Mp3SyncError, match="no valid MP3 frame header in 1"):
        for _ in range(10):
            list(strict.split(bytes(500)))
