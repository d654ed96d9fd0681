"""voicecli.listen.echo_path: audio.echo chooses the defence, and "aec" falls back to the gate when it cannot run."""

from __future__ import annotations

import numpy as np
import pytest

from voicecli.audio.far_end import FarEndReference
from voicecli.config import Config
from voicecli.listen.echo_path import open_echo_path
from voicecli.listen.microphone import AudioBlock


class TappablePlayer:
    def __init__(self) -> None:
        self.reference: FarEndReference | None = None

    def tap(self, reference: FarEndReference | None) -> None:
        self.reference = reference


class SpeakerLike:
    def __init__(self) -> None:
        self.player = TappablePlayer()


def test_aec_taps_the_speakers_player_and_cleans_blocks() -> None:
    sink = SpeakerLike()
    path = open_echo_path(Config.load(env={}), sink)
    assert path.mode == "aec" and path.canceller is not None
    assert not path.gate_open()  # AEC3 has not adapted to any far end yet: the level gate guards meanwhile
    assert sink.player.reference is path.canceller.reference
    sink.player.reference.push(np.zeros(160, np.float32), 16_000, 10.0)  # something (silence) was played
    cleaned = path.clean(AudioBlock(np.full(512, 0.01, np.float32), 10.1))
    assert len(cleaned.samples) == 480 and cleaned.at == pytest.approx(10.1 - 32 / 16_000)


@pytest.mark.parametrize(("env", "mode"), [({"VOICECLI_AUDIO__ECHO": "gate"}, "gate"),
                                           ({"VOICECLI_AUDIO__ECHO": "off"}, "off")])
def test_gate_and_off_run_no_canceller(env: dict[str, str], mode: str) -> None:
    sink = SpeakerLike()
    path = open_echo_path(Config.load(env=env), sink)
    assert path.mode == mode and path.canceller is None and sink.player.reference is None


def test_no_speaker_means_no_echo() -> None:
    path = open_echo_path(Config.load(env={}), object())  # muted, or answers saved to a file
    assert path.mode == "off" and path.canceller is None


def test_a_missing_binding_falls_back_to_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    import voicecli.audio.echo_cancel as echo_cancel

    monkeypatch.setattr(echo_cancel, "BINDING", "pywebrtc_audio_not_installed")
    sink = SpeakerLike()
    path = open_echo_path(Config.load(env={}), sink)
    assert path.mode == "gate" and "pywebrtc-audio" in path.note and sink.player.reference is None
