"""Where a piece's decoding is cut into parts, and how the parts are put back together (no model: a stand-in decoder
whose rendering of a sample depends only on where the sample is, so any error in the splicing shows)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from voicecli_endpoint.engines.decoder_parts import (
    CONTEXT_FRAMES,
    CROSSFADE_SAMPLES,
    DECODE_MS_PER_FRAME,
    FIRST_SPEECH_FRAMES,
    FRAME_MS,
    FRAME_SAMPLES,
    MAX_PART_FRAMES,
    MIN_PART_FRAMES,
    SEAM_REACH_FRAMES,
    Part,
    decode_parts,
    frame_energy,
    plan_parts,
)

SILENCE, SPEECH = -9.0, 6.0


def energy(lead: int, speech: int, tail: int, quiet: tuple[int, ...] = ()) -> np.ndarray:
    """Kokoro-like per-frame energy: pad silence, speech (with dips at `quiet` frames), pad silence."""
    curve = np.array([SILENCE] * lead + [SPEECH] * speech + [SILENCE] * tail)
    for frame in quiet:
        curve[frame] = -1.0
    return curve


def rendering(start: int, stop: int) -> np.ndarray:
    """A decoder whose sample n is the same whatever range it was rendered in."""
    n = np.arange(start * FRAME_SAMPLES, stop * FRAME_SAMPLES)
    return np.sin(n * 0.01).astype(np.float32)


def test_energy_is_averaged_per_frame() -> None:
    assert frame_energy(np.array([[1.0, 3.0, -2.0, -4.0]])).tolist() == [2.0, -3.0]


def test_a_short_piece_is_decoded_whole() -> None:
    fits = FIRST_SPEECH_FRAMES[1]  # speech that fits in a first part: nothing to gain, whatever the pad silence
    assert plan_parts(energy(12, fits, 17)) == [Part(0, 12 + fits + 17, 0, 12 + fits + 17)]
    assert len(plan_parts(energy(12, fits + 1, 17))) > 1
    assert plan_parts(energy(60, 0, 0)) == [Part(0, 60, 0, 60)]  # no sound at all


def test_the_first_cut_is_the_quietest_frame_of_the_first_speech_window() -> None:
    lead = 12
    quiet = lead + 20  # a stop closure 0.5 s into the speech
    parts = plan_parts(energy(lead, 100, 17, quiet=(quiet, lead + 40)))
    assert parts[0].stop == quiet
    assert parts[0].decode_start == lead - CONTEXT_FRAMES  # the leading pad is not decoded
    assert parts[0].decode_stop == quiet + CONTEXT_FRAMES
    assert parts[1].start == quiet and parts[1].decode_start == quiet - CONTEXT_FRAMES


def test_a_seam_goes_where_it_is_not_heard() -> None:
    """Quiet or unvoiced frames only, where the window has one: not the quieter middle of a vowel."""
    lead, high = 12, FIRST_SPEECH_FRAMES[1]
    curve = energy(lead, 100, 17)
    curve[lead + 15] = 2.5  # a dip inside a vowel: the quietest frame of the window, but voiced
    pitch = np.full(len(curve), 200.0)
    assert plan_parts(curve, pitch)[0].stop == lead + 15  # nothing better within reach
    curve[lead + high + 3] = 0.5  # a closure just past the window
    assert plan_parts(curve, pitch)[0].stop == lead + high + 3
    pitch[lead + 20] = 20.0  # an unvoiced consonant inside the window (loud, as an "s" is)
    assert plan_parts(curve, pitch)[0].stop == lead + 20
    curve[lead + 25] = -2.0  # and a pause, quieter still
    assert plan_parts(curve, pitch)[0].stop == lead + 25


@given(lead=st.integers(0, 20), speech=st.integers(0, 400), tail=st.integers(0, 25),
       quiet=st.lists(st.integers(0, 444), max_size=12))
def test_parts_cover_the_piece_and_grow_at_most_twofold(lead: int, speech: int, tail: int,
                                                       quiet: list[int]) -> None:
    curve = energy(lead, speech, tail, quiet=tuple(q for q in quiet if q < lead + speech + tail))
    parts = plan_parts(curve)
    frames = len(curve)
    assert parts[0].start == 0 and parts[-1].stop == frames
    assert all(a.stop == b.start for a, b in itertools.pairwise(parts))
    for part in parts:
        assert 0 <= part.decode_start <= max(part.start, part.decode_start) and part.decode_stop <= frames
        assert part.decode_stop >= min(frames, part.stop + (CONTEXT_FRAMES if part is not parts[-1] else 0))
    if len(parts) > 1:
        speech_start = int(np.flatnonzero(curve > 0)[0])
        low, high = FIRST_SPEECH_FRAMES
        speech_end = int(np.flatnonzero(curve > 0)[-1]) + 1
        assert speech_start + low <= parts[0].stop < speech_start + high + SEAM_REACH_FRAMES
        assert parts[-2].stop < speech_end  # no cut in the trailing pad silence
        for before, part in itertools.pairwise(parts[:-1]):
            sent_ms = (before.stop - speech_start) * FRAME_MS
            budget = int(sent_ms / DECODE_MS_PER_FRAME) - 2 * CONTEXT_FRAMES
            bound = max(MIN_PART_FRAMES + 1, min(MAX_PART_FRAMES, budget))
            assert MIN_PART_FRAMES <= part.stop - part.start < bound  # decoded before the speech sent has played


@given(lead=st.integers(0, 20), speech=st.integers(0, 300), tail=st.integers(0, 25),
       quiet=st.lists(st.integers(0, 344), max_size=8))
def test_spliced_parts_are_the_whole_rendering(lead: int, speech: int, tail: int, quiet: list[int]) -> None:
    curve = energy(lead, speech, tail, quiet=tuple(q for q in quiet if q < lead + speech + tail))
    parts = plan_parts(curve)
    out = list(decode_parts(rendering, parts))
    whole = rendering(0, len(curve))
    joined = np.concatenate(out)
    assert len(out) == len(parts) and len(joined) == len(whole)
    skipped = parts[0].decode_start * FRAME_SAMPLES  # the first part's undecoded lead: silence
    assert not joined[:skipped].any()
    np.testing.assert_allclose(joined[skipped:], whole[skipped:], atol=1e-6)


def test_a_seam_is_a_crossfade_from_one_rendering_to_the_other() -> None:
    parts = [Part(0, 40, 0, 48), Part(40, 80, 32, 80)]
    ones = lambda start, stop: np.ones((stop - start) * FRAME_SAMPLES, np.float32)  # noqa: E731
    zeros = lambda start, stop: np.zeros((stop - start) * FRAME_SAMPLES, np.float32)  # noqa: E731
    calls = iter([ones, zeros])
    first, second = decode_parts(lambda start, stop: next(calls)(start, stop), parts)
    assert len(first) == 40 * FRAME_SAMPLES - CROSSFADE_SAMPLES // 2 and first.min() == 1.0
    fade = second[:CROSSFADE_SAMPLES]
    assert fade[0] == 1.0 and fade[-1] == 0.0 and np.all(np.diff(fade) < 0)
    assert not second[CROSSFADE_SAMPLES:].any()


def test_a_decoder_that_returns_the_wrong_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="samples for 10 frames"):
        list(decode_parts(lambda start, stop: np.zeros(5, np.float32), [Part(0, 10, 0, 10)]))
