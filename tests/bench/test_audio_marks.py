"""The audio-side marks of `voicecli bench turns`: where sound starts and stops, sample-accurately."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from voicecli.bench.audio_marks import audible_share, first_audible, last_voiced, pauses_ms, sound_span, trim

RATE = 16_000


def tone(seconds: float, level: float = 0.3) -> NDArray[np.float32]:
    t = np.arange(round(seconds * RATE)) / RATE
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(seconds: float, noise: float = 0.0) -> NDArray[np.float32]:
    rng = np.random.default_rng(7)
    return (noise * rng.standard_normal(round(seconds * RATE))).astype(np.float32)


def test_silence_and_quiet_noise_have_no_sound() -> None:
    assert sound_span(silence(1.0), RATE) is None
    assert first_audible(silence(1.0, noise=0.001), RATE) is None  # -60 dBFS: MP3 decoder hiss, not an answer
    assert last_voiced(np.zeros(0, dtype=np.float32), RATE) is None
    assert trim(silence(0.5), RATE).size == 0


def test_marks_are_the_first_and_last_loud_samples_not_window_edges() -> None:
    lead, body = 0.2537, 0.5
    audio = np.concatenate([silence(lead, noise=0.001), tone(body), silence(0.3, noise=0.001)])
    start = round(lead * RATE)
    end = start + round(body * RATE) - 1
    first, last = sound_span(audio, RATE) or (-1, -1)
    amplitude = 10 ** (-40 / 20)
    assert abs(audio[first]) >= amplitude and np.all(np.abs(audio[start:first]) < amplitude)
    assert start <= first < start + RATE // 1000 * 3  # within the tone's first 3 ms (a sine starts at 0)
    assert end - RATE // 1000 * 3 < last <= end
    assert first_audible(audio, RATE) == first and last_voiced(audio, RATE) == last
    assert len(trim(audio, RATE)) == last - first + 1


def test_a_mid_sentence_pause_is_measured_and_short_gaps_are_not_pauses() -> None:
    audio = np.concatenate([tone(0.4), silence(0.6), tone(0.3), silence(0.05), tone(0.3)])
    (pause,) = pauses_ms(audio, RATE)
    assert pause == pytest.approx(600, abs=3)  # sample to sample, not window to window
    assert pauses_ms(tone(1.0), RATE) == []


def test_stereo_input_is_refused() -> None:
    with pytest.raises(ValueError):
        sound_span(np.zeros((100, 2), dtype=np.float32), RATE)


def test_audible_share_is_the_part_of_a_stretch_with_sound_in_it() -> None:
    """A second of which the middle half sounds: about half its windows are audible (the windows straddling the
    edges count when their level is over the threshold); silence is 0, a stretch shorter than a window None."""
    audio = np.concatenate([silence(0.25), tone(0.5), silence(0.25)])
    share = audible_share(audio, RATE)
    assert share is not None and share == pytest.approx(0.5, abs=0.02)
    assert audible_share(silence(1.0), RATE) == 0.0
    assert audible_share(tone(0.005), RATE) is None
