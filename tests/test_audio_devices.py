"""Device listing and name-or-index resolution against the PortAudio devices of the private PulseAudio daemon."""

from __future__ import annotations

import pytest

from tests.pulse import PrivatePulse
from voicecli.audio_devices import (
    DeviceNotFoundError,
    describe_devices,
    list_devices,
    resolve_device,
    silence_alsa_errors,
)


def test_lists_pulse_devices(pulse: PrivatePulse) -> None:
    outputs = list_devices("output")
    names = [d.name for d in outputs]
    assert "pulse" in names and "default" in names
    assert sum(d.is_default_output for d in outputs) == 1
    assert all(d.max_input_channels > 0 for d in list_devices("input"))
    assert "pulse" in describe_devices()


def test_resolves_default_index_name_and_fragment(pulse: PrivatePulse) -> None:
    default = resolve_device(None, "output")
    assert default.is_default_output
    by_index = resolve_device(default.index, "output")
    assert by_index == default
    assert resolve_device(str(default.index), "output") == default
    assert resolve_device("pulse", "output").name == "pulse"
    assert resolve_device("PUL", "output").name == "pulse"  # unique case-insensitive fragment


def test_unknown_or_ambiguous_device_lists_the_devices(pulse: PrivatePulse) -> None:
    with pytest.raises(DeviceNotFoundError, match="matches no output device") as err:
        resolve_device("nope", "output")
    assert "pulse" in str(err.value)
    with pytest.raises(DeviceNotFoundError, match="index 999"):
        resolve_device(999, "input")
    with pytest.raises(DeviceNotFoundError, match="matches several"):
        resolve_device("u", "output")  # in both "pulse" and "default"


def test_alsa_error_handler_installs() -> None:
    assert silence_alsa_errors() is True
    assert silence_alsa_errors() is True  # idempotent
