"""The double-talk detector on synthetic mixtures (real speech through the synthetic room of echo_mixtures), fed as
the canceller feeds it: the capture and the far end at the echo's delay, in 32 ms blocks."""

from __future__ import annotations

import numpy as np
import pytest

from tests.audio.echo_mixtures import Mixture, mixture, speech
from voicecli.audio.double_talk import SEARCH_MS, DoubleTalkDetector
from voicecli.audio.echo_cancel import LEAK_COHERENCE
from voicecli.audio.rates import SPEECH_RATE

BLOCK = 512


def flags(mix: Mixture, delay_s: float, search_ms: int = SEARCH_MS) -> np.ndarray:
    """`near_end` after each block, the far end fed as the canceller feeds it: `lead` ahead of the echo's delay
    (`delay_s`, which the tests set on or off the true one)."""
    detector = DoubleTalkDetector(search_ms=search_ms)
    delay = round(delay_s * SPEECH_RATE) - detector.lead
    far = np.concatenate([np.zeros(delay, np.float32), mix.far])[: len(mix.far)]
    out = []
    for end in range(BLOCK, len(mix.capture) + 1, BLOCK):
        detector.feed(mix.capture[end - BLOCK : end], far[end - BLOCK : end])
        out.append(detector.near_end)
    return np.array(out)


@pytest.mark.parametrize("echo_db", [0.0, 6.0])
def test_the_answers_echo_alone_is_never_double_talk(echo_db: float) -> None:
    far = speech("q01.wav", "q03.wav", "q05.wav", "q07.wav")
    assert not flags(mixture(far, None, 0.08, echo_db), 0.08).any()


@pytest.mark.parametrize("echo_db", [0.0, 6.0])
def test_a_voice_under_the_echo_is_told_within_half_a_second(echo_db: float) -> None:
    far = speech("q01.wav", "q03.wav", "q05.wav", "q07.wav")
    mix = mixture(far, speech("q02.wav"), 0.08, echo_db, near_at_s=3.5)
    told = flags(mix, 0.08)
    voice_from = int(np.argmax(np.abs(mix.near) > 0.01 * np.max(np.abs(mix.near))))  # the WAV's lead-in is silent
    first = voice_from // BLOCK
    assert not told[:first].any()
    assert told[first : first + SPEECH_RATE // 2 // BLOCK].any(), "not told within 0.5 s of the voice"
    # measured: 0.15 s in at 0 dB, 0.34 s at +6 dB, and then most of the voice (62-68 of its 104 blocks)


def test_a_voice_with_nothing_playing_is_not_double_talk() -> None:
    near = speech("q02.wav")
    silent = np.zeros(len(near), np.float32)
    assert not flags(Mixture(silent, near, near, slice(0, len(near))), 0.08).any()


@pytest.mark.parametrize("off_ms", [-15, -6, 6, 15])
def test_the_echo_alone_stays_the_echo_with_the_delay_a_few_ms_off(off_ms: int) -> None:
    """Live the far end is only as right as the player's DAC times and the bulk delay (followed in ~6 ms steps,
    moved by restarts): the lags searched either side keep the echo coherent."""
    far = speech("q01.wav", "q03.wav", "q05.wav")
    assert not flags(mixture(far, None, 0.08, 6.0), 0.08 + off_ms / 1000).any()


def test_without_the_search_a_few_ms_off_reads_as_a_voice() -> None:
    """Why the lags are searched: at the echo's delay alone, 15 ms off is enough to flag the echo."""
    far = speech("q01.wav", "q03.wav", "q05.wav")
    assert flags(mixture(far, None, 0.08, 6.0), 0.08 - 0.015, search_ms=0).any()


def test_a_far_end_beyond_the_search_is_what_it_needs_to_be_right() -> None:
    """A far end 60 ms off the echo (beyond the lags searched) reads as incoherent: the canceller feeds it only once
    the echo's delay is known."""
    far = speech("q01.wav", "q03.wav")
    assert flags(mixture(far, None, 0.08, 6.0), 0.02).any()


def scores(signal: np.ndarray, far_end: np.ndarray, delay_s: float) -> np.ndarray:
    """Every counted frame's best coherence (what DoubleTalkDetector.feed returns), fed as `flags` feeds it."""
    detector = DoubleTalkDetector()
    delay = round(delay_s * SPEECH_RATE) - detector.lead
    far = np.concatenate([np.zeros(delay, np.float32), far_end])[: len(far_end)]
    found: list[float] = []
    for end in range(BLOCK, len(signal) + 1, BLOCK):
        found += [score for score in detector.feed(signal[end - BLOCK : end], far[end - BLOCK : end])
                  if score is not None]
    return np.array(found)


@pytest.mark.parametrize("echo_db", [0.0, 6.0])
def test_echo_let_through_is_coherent_with_the_far_end_and_a_voice_is_not(echo_db: float) -> None:
    """What voicecli.audio.echo_cancel.EchoCanceller.leaking asks of the canceller's output: the echo passed whole
    scores LEAK_COHERENCE or more in nearly every frame (measured: 94 %), a voice alone while the far end plays in
    nearly none (0.5 %)."""
    far = speech("q01.wav", "q03.wav", "q05.wav", "q07.wav")
    echo = scores(mixture(far, None, 0.08, echo_db).capture, far, 0.08)
    assert len(echo) > 300 and np.mean(echo >= LEAK_COHERENCE) >= 0.85
    voice = mixture(far, speech("q02.wav", "q04.wav"), 0.08, echo_db, near_at_s=1.0).near
    noise = np.random.default_rng(1).normal(0, 1e-4, len(voice)).astype(np.float32)  # heard, as a microphone is
    alone = scores(voice + noise, far, 0.08)
    assert len(alone) > 150 and np.mean(alone >= LEAK_COHERENCE) <= 0.05


def test_capture_and_far_end_must_match_in_length() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        DoubleTalkDetector().feed(np.zeros(512, np.float32), np.zeros(256, np.float32))
