"""The speaker's play position at a barge-in (`Speaker.played_s`, read right after `stop`) is what a listener heard:
checked against the recording of the private PulseAudio's virtual speaker (`vspeaker.monitor`)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.pulse import PrivatePulse
from voicecli.audio.levels import rms_dbfs
from voicecli.playback.player import Player
from voicecli.playback.sinks import PlayPosition
from voicecli.playback.speaker import ECHO_TAIL_S, Speaker

pytestmark = pytest.mark.slow  # real-time playback on a PulseAudio daemon

RATE = 24_000
CAP_RATE = 48_000
SILENT = 1e-3
PIECE = CAP_RATE // 200
TOLERANCE_S = 0.08
"""How far the position may be from what was recorded: a few 10 ms blocks of the device and the recorder, well
under a word (~250-400 ms), which is what the history's cut is counted in."""


def test_the_position_at_a_stop_is_what_the_speaker_played(pulse: PrivatePulse) -> None:
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(4 * RATE) / RATE)).astype(np.float32)
    recorder = pulse.record(rate=CAP_RATE)
    time.sleep(0.3)  # parec's first buffers
    speaker = Speaker(Player())
    try:
        assert isinstance(speaker, PlayPosition) and speaker.played_s("a1") is None
        time.sleep(0.3)  # the stream runs on silence before an answer, as in the app
        written = time.monotonic()
        speaker.write(tone, "a1")  # 4 s at once, far ahead of real time
        time.sleep(1.3)
        stopped = time.monotonic()
        speaker.stop()
        played = speaker.played_s("a1")
        time.sleep(0.3)
    finally:
        speaker.close()
    time.sleep(0.2)
    captured = recorder.stop()
    # What was heard: the 5 ms pieces with sound in them (a gap from a late audio callback is not counted, as the
    # player's position does not count it either).
    pieces = captured[: len(captured) // PIECE * PIECE].reshape(-1, PIECE)
    heard_s = int(np.count_nonzero(np.abs(pieces).max(axis=1) > SILENT)) * PIECE / CAP_RATE
    print(f"MEASURE speaker_position_at_stop {played:.3f} s, recorded {heard_s:.3f} s")
    assert played is not None and stopped - written - 0.4 < played <= stopped - written  # the device latency less
    assert abs(played - heard_s) < TOLERANCE_S


def test_the_level_is_what_the_dac_played_through_the_echo_tail_after_the_last_sample_and_after_a_hold(
        pulse: PrivatePulse) -> None:
    """The echo gate compares the microphone with `level_db`: the loudest of what left the DAC over the last
    ECHO_TAIL_S, whose echo may be coming in now. So it is a loud piece's level while that piece plays, even when a
    quiet one was written after it (the answer is written ahead of playback); it covers the echo still on its way
    after the last sample, then falls silent; a hold flushes the device, so the tail counts from the hold."""
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(RATE // 2) / RATE)).astype(np.float32)
    quiet = tone / 100  # 40 dB down
    speaker = Speaker(Player())
    try:
        time.sleep(0.3)
        assert speaker.level_db() == -120.0  # nothing played yet
        speaker.write(np.concatenate([tone, tone]), "a1")  # 1 s loud, then 0.5 s quiet, all written at once
        speaker.write(quiet, "a1")
        speaker.finish("a1")
        time.sleep(0.6)
        assert abs(speaker.level_db() - rms_dbfs(tone)) < 0.5  # the loud piece sounds (the quiet one was last)
        assert speaker.player.wait_done(timeout=5)
        ended = speaker.player.sounding_until
        assert time.monotonic() - ended < 0.2  # wait_done returns as the last sample leaves the DAC
        assert abs(speaker.level_db() - rms_dbfs(quiet)) < 0.5  # the quiet end's echo may still come
        time.sleep(max(0.0, ended + ECHO_TAIL_S + 0.02 - time.monotonic()))
        assert speaker.level_db() == -120.0
        speaker.write(np.concatenate([tone] * 8), "a2")  # 4 s
        time.sleep(1.0)
        speaker.player.hold()
        held = time.monotonic()
        assert speaker.player.sounding_until <= held  # flushed: nothing more leaves the DAC
        assert abs(speaker.level_db() - rms_dbfs(tone)) < 0.5
        time.sleep(max(0.0, held + ECHO_TAIL_S + 0.02 - time.monotonic()))
        assert speaker.level_db() == -120.0  # held: nothing sounds, and the echo is over
    finally:
        speaker.close()
