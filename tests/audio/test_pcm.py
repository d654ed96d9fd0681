"""PCM16 payload bytes, split at arbitrary (odd) offsets, decode to exactly the samples of the whole payload."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicecli.audio.pcm import Pcm16Aligner, Pcm16Decoder, pcm16_to_float32


def test_whole_payload_scaling() -> None:
    data = np.array([0, 1, -1, 32767, -32768], dtype="<i2").tobytes()
    out = pcm16_to_float32(data)
    assert out.dtype == np.float32
    assert out.tolist() == [0.0, 1 / 32768, -1 / 32768, 32767 / 32768, -1.0]


def test_odd_payload_is_rejected() -> None:
    with pytest.raises(ValueError, match="whole number"):
        pcm16_to_float32(b"\x01\x02\x03")


@settings(max_examples=100, deadline=None)
@given(
    st.binary(min_size=0, max_size=3000),
    st.lists(st.integers(1, 301), min_size=1, max_size=12),
    st.sampled_from([1, 2]),
)
def test_any_split_decodes_like_the_whole(data: bytes, sizes: list[int], channels: int) -> None:
    frame = 2 * channels
    whole = data[: len(data) - len(data) % frame]
    dec = Pcm16Decoder(channels)
    parts, pos, k = [], 0, 0
    while pos < len(data):
        n = sizes[k % len(sizes)]
        part = dec.feed(data[pos : pos + n])
        assert part.size % channels == 0  # never half a frame
        parts.append(part)
        pos, k = pos + n, k + 1
    assert dec.pending_bytes == len(data) % frame
    dec.flush()
    assert dec.pending_bytes == 0
    got = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    assert np.array_equal(got, pcm16_to_float32(whole))


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@given(st.binary(max_size=200).filter(lambda b: len(b) % 2 == 0), st.lists(st.integers(0, 400), max_size=20))
def test_pcm_cut_anywhere_comes_out_as_whole_samples(samples: bytes, cuts: list[int]) -> None:
    aligner = Pcm16Aligner()
    out = [aligner.feed(part) for part in _cut(samples, cuts)]
    assert all(len(piece) % 2 == 0 for piece in out)
    assert b"".join(out) == samples and aligner.flush() == 0
