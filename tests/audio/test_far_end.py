"""The far-end reference: what the player handed to the device, found again by the time it was audible."""

from __future__ import annotations

import numpy as np

from voicecli.audio.far_end import FarEndReference
from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.resample import resample


def _chirp(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(round(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * (200 + 400 * t) * t)).astype(np.float32)


def _push_all(reference: FarEndReference, signal: np.ndarray, rate: int, t0: float, jitter_s: float = 0.0) -> None:
    block = rate // 100
    rng = np.random.default_rng(1)
    for i in range(0, len(signal), block):
        stamp = t0 + i / rate + float(rng.uniform(-jitter_s, jitter_s))
        reference.push(signal[i : i + block].reshape(-1, 1), rate, stamp)


def test_read_returns_what_was_played_at_that_time_at_16k() -> None:
    source = _chirp(2.0, 24_000)
    reference = FarEndReference(keep_s=4.0)
    _push_all(reference, source, 24_000, t0=100.0, jitter_s=0.003)  # DAC stamps jitter by +-3 ms
    expected = resample(source, 24_000, SPEECH_RATE)
    got = reference.read(100.5, SPEECH_RATE // 2)  # 0.5 s .. 1.0 s into the answer
    lags = range(-80, 81)
    scores = [float(np.dot(got, expected[SPEECH_RATE // 2 + lag : SPEECH_RATE + lag])) for lag in lags]
    best = lags[int(np.argmax(scores))]
    assert abs(best) <= 16, f"reference off by {best} samples"  # 1 ms: the resampler's own delay at most
    assert reference.reanchors == 0  # jitter inside REANCHOR_S keeps one continuous stretch


def test_time_before_and_between_answers_reads_as_silence() -> None:
    reference = FarEndReference(keep_s=4.0)
    assert not reference.read(5.0, 160).any()  # nothing played yet
    tone = np.full(SPEECH_RATE // 100, 0.25, np.float32)
    for k in range(20):
        reference.push(tone, SPEECH_RATE, 10.0 + k * 0.01)
    for k in range(20):  # the stream was stopped for 0.5 s (barge-in), then restarted
        reference.push(tone, SPEECH_RATE, 10.7 + k * 0.01)
    assert reference.reanchors == 1
    assert np.allclose(reference.read(10.05, 800), 0.25)
    assert not reference.read(10.3, 1600).any()
    assert np.allclose(reference.read(10.75, 800), 0.25)
    assert reference.played_until is not None and abs(reference.played_until - 10.9) < 1e-3


def test_stereo_blocks_are_mixed_to_mono_and_old_audio_is_forgotten() -> None:
    reference = FarEndReference(keep_s=1.0)
    stereo = np.stack([np.full(160, 0.2, np.float32), np.full(160, 0.4, np.float32)], axis=1)
    for k in range(200):  # 2 s into a 1 s ring
        reference.push(stereo, SPEECH_RATE, 1.0 + k * 0.01)
    assert np.allclose(reference.read(2.5, 160), 0.3)
    assert not reference.read(1.2, 160).any()  # older than keep_s


def test_a_cut_drops_what_the_device_discarded_and_the_restart_lands_at_its_own_time() -> None:
    """A barge-in aborts the stream at 10.92 s: the 80 ms it had pushed for 10.92-11.0 s never played, and the
    restarted stream's first block, due at the DAC at 11.01 s (10 ms from where the discarded audio ended, inside
    REANCHOR_S), is placed at 11.01 s, not appended at 11.0 s (10 ms early for the whole next answer)."""
    reference = FarEndReference(keep_s=4.0)
    old, new = np.full(160, 0.25, np.float32), np.full(160, 0.5, np.float32)
    for k in range(100):  # 10.0 .. 11.0 s pushed
        reference.push(old, SPEECH_RATE, 10.0 + k * 0.01)
    reference.cut(10.92)
    for k in range(20):
        reference.push(new, SPEECH_RATE, 11.01 + k * 0.01)
    assert np.allclose(reference.read(10.5, 6720), 0.25)  # 10.5 .. 10.92 s: played
    assert not reference.read(10.92, 1440).any()  # 10.92 .. 11.01 s: discarded, then nothing yet
    assert np.allclose(reference.read(11.01, 3200), 0.5)
    assert reference.played_until is not None and abs(reference.played_until - 11.21) < 1e-3
    assert reference.cuts == 1  # the canceller reads it as a restart whose echo delay must be confirmed again


def test_a_cut_before_anything_played_or_past_the_newest_sample_changes_nothing() -> None:
    reference = FarEndReference(keep_s=4.0)
    reference.cut(5.0)
    assert reference.played_until is None and reference.cuts == 0  # no stream had played: nothing restarted
    tone = np.full(160, 0.25, np.float32)
    for k in range(10):
        reference.push(tone, SPEECH_RATE, 6.0 + k * 0.01)
    reference.cut(6.2)  # the stream had already played out everything pushed
    assert np.allclose(reference.read(6.0, 1600), 0.25)
    assert reference.played_until is not None and abs(reference.played_until - 6.1) < 1e-3


def test_a_sound_card_clock_off_the_monotonic_clock_reads_in_place_without_reanchoring() -> None:
    """The card's clock runs 1,000 ppm fast against the monotonic clock the DAC times are read on (PulseAudio here:
    ~242 ppm): over 100 s its samples get 100 ms ahead of a timeline fixed at the first block, which re-anchored
    by REANCHOR_S every ~20 s. The timeline follows the latest DAC times instead: one stretch, and a read at a
    monotonic time finds what the card played then."""
    rng = np.random.default_rng(3)
    played = (0.1 * rng.standard_normal(100 * SPEECH_RATE)).astype(np.float32)
    slow = 1 / (1 + 1000e-6)
    reference = FarEndReference(keep_s=4.0)
    block = SPEECH_RATE // 100
    for i in range(0, len(played), block):
        reference.push(played[i : i + block], SPEECH_RATE, 50.0 + i / SPEECH_RATE * slow + float(rng.uniform(0, 0.002)))
    at = 50.0 + 98 * slow  # the card's 98th second
    got = reference.read(at, SPEECH_RATE // 10)
    lags = range(-160, 161)
    scores = [float(np.dot(got, played[98 * SPEECH_RATE + lag : 98 * SPEECH_RATE + lag + len(got)])) for lag in lags]
    best = lags[int(np.argmax(scores))]
    assert abs(best) <= 24, f"reference off by {best} samples"  # the median's jitter and 1 s of drift at most
    assert reference.reanchors == 0 and reference.stretches == 1


def test_a_stream_restarted_within_reanchor_s_of_its_cut_lands_at_its_own_time() -> None:
    """Aborted at 31.0 s and restarted at once: its first block is due at the DAC at 31.01 s, 10 ms after the cut
    (inside REANCHOR_S). Appended back to back at the cut, as any block that close to the end was, the whole next
    answer's reference sat 10 ms early; after a cut the next block begins a stretch at its own time."""
    reference = FarEndReference(keep_s=4.0)
    for k in range(100):
        reference.push(np.full(160, 0.1, np.float32), SPEECH_RATE, 30.0 + k * 0.01)
    reference.cut(31.0)
    for k in range(20):
        reference.push(np.full(160, 0.5, np.float32), SPEECH_RATE, 31.01 + k * 0.01)
    assert np.allclose(reference.read(30.5, 8000), 0.1)  # 30.5-31.0 s: the first stream
    assert not reference.read(31.0, 160).any()  # 31.0-31.01 s: nothing played
    assert np.allclose(reference.read(31.01, 3200), 0.5)
    assert reference.played_until is not None and abs(reference.played_until - 31.21) < 1e-3
    assert reference.cuts == 1 and reference.stretches == 2 and reference.reanchors == 0
