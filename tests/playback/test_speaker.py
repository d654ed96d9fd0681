"""The speaker's play position at a barge-in (`Speaker.played_s`, read right after `stop`) is what a listener heard:
checked against the recording of the private PulseAudio's virtual speaker (`vspeaker.monitor`)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.pulse import PrivatePulse
from voicecli.playback.player import Player
from voicecli.playback.sinks import PlayPosition
from voicecli.playback.speaker import Speaker

pytestmark = pytest.mark.slow  # real-time playback on a PulseAudio daemon

RATE = 24_000
CAP_RATE = 48_000
SILENT = 1e-3
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
        speaker.write(tone, "a1")  # 4 s at once, far ahead of real time
        time.sleep(1.3)
        speaker.stop()
        played = speaker.played_s("a1")
        time.sleep(0.3)
    finally:
        speaker.close()
    time.sleep(0.2)
    captured = recorder.stop()
    loud = np.flatnonzero(np.abs(captured) > SILENT)
    heard_s = (loud[-1] - loud[0] + 1) / CAP_RATE
    print(f"MEASURE speaker_position_at_stop {played:.3f} s, recorded {heard_s:.3f} s")
    assert played is not None and 1.0 < played < 1.4
    assert abs(played - heard_s) < TOLERANCE_S
