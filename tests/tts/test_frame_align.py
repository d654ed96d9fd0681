"""Re-alignment of audio cut at arbitrary byte offsets (what SageMaker's response stream does to PayloadParts)."""

from __future__ import annotations

import itertools

import lameenc
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voicecli.protocol import mp3_frame_length
from voicecli.tts.frame_align import Mp3Aligner, PcmAligner


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
        position += mp3_frame_length(data[position : position + 4])
    return position == len(data)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=40))
def test_mp3_cut_anywhere_comes_out_as_whole_frames_and_unchanged(cuts: list[int]) -> None:
    aligner = Mp3Aligner()
    out = [aligner.feed(part) for part in _cut(MP3, cuts)]
    assert all(_whole_frames(piece) for piece in out if piece)
    assert b"".join(out) == MP3
    assert aligner.flush() == 0 and aligner.skipped == 0


def test_mp3_truncated_tail_is_held_back_and_reported() -> None:
    aligner = Mp3Aligner()
    first = mp3_frame_length(MP3[:4])
    assert aligner.feed(MP3[: first + 10]) == MP3[:first]
    assert aligner.flush() == 10


def test_mp3_junk_before_a_frame_is_skipped() -> None:
    aligner = Mp3Aligner()
    assert aligner.feed(b"ID3junk" + MP3) == MP3
    assert aligner.skipped == 7


@given(st.binary(max_size=200).filter(lambda b: len(b) % 2 == 0), st.lists(st.integers(0, 400), max_size=20))
def test_pcm_cut_anywhere_comes_out_as_whole_samples(samples: bytes, cuts: list[int]) -> None:
    aligner = PcmAligner()
    out = [aligner.feed(part) for part in _cut(samples, cuts)]
    assert all(len(piece) % 2 == 0 for piece in out)
    assert b"".join(out) == samples and aligner.flush() == 0
