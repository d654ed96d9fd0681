"""Audio device discovery for `voicecli doctor`, the TUI and the player: list, resolve name-or-index, re-scan.

Why the care: sounddevice fails at *import* when the PortAudio shared library is missing, PortAudio enumerates
devices once at initialisation (a PulseAudio daemon or env that appears later is invisible until re-initialised),
and a bad device name should fail with the list of devices that do exist.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

__all__ = [
    "AudioDeviceError",
    "DeviceInfo",
    "DeviceNotFoundError",
    "NoDeviceError",
    "PortAudioMissingError",
    "describe_devices",
    "list_devices",
    "load_sounddevice",
    "reinitialize_portaudio",
    "resolve_device",
    "silence_alsa_errors",
]

Kind = Literal["input", "output"]


class AudioDeviceError(RuntimeError):
    """Base for audio device problems; the message says what to do."""


class PortAudioMissingError(AudioDeviceError):
    pass


class NoDeviceError(AudioDeviceError):
    pass


class DeviceNotFoundError(AudioDeviceError):
    pass


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float
    default_low_output_latency: float
    is_default_input: bool
    is_default_output: bool

    def supports(self, kind: Kind) -> bool:
        return (self.max_input_channels if kind == "input" else self.max_output_channels) > 0

    def describe(self) -> str:
        marks = ("<" if self.is_default_input else "") + (">" if self.is_default_output else "")
        return (
            f"{marks:2} {self.index:3} {self.name} ({self.hostapi}, "
            f"{self.max_input_channels} in, {self.max_output_channels} out, {self.default_samplerate:g} Hz)"
        )


def load_sounddevice() -> ModuleType:
    """Import sounddevice, turning 'PortAudio library not found' into an actionable error."""
    try:
        import sounddevice as module
    except OSError as exc:  # raised by sounddevice when libportaudio is absent
        raise PortAudioMissingError(
            f"PortAudio is not installed ({exc}). Install it: apt-get install libportaudio2 "
            "(and pulseaudio libasound2-plugins for PulseAudio), or brew install portaudio on macOS."
        ) from exc
    loaded: ModuleType = module
    return loaded


def reinitialize_portaudio() -> None:
    """Re-scan devices: PortAudio enumerates once at import, so a PulseAudio server/env that appeared later
    (a daemon started by a test, PULSE_SERVER set after import) is only seen after this."""
    sd = load_sounddevice()
    sd._terminate()
    sd._initialize()


def list_devices(kind: Kind | None = None) -> list[DeviceInfo]:
    """All devices (or only those with input/output channels)."""
    sd = load_sounddevice()
    raw: Any = sd.query_devices()
    hostapis: Any = sd.query_hostapis()
    try:
        default_in, default_out = (int(x) for x in sd.default.device)
    except (TypeError, ValueError):
        default_in = default_out = -1
    if default_in < 0 or default_out < 0:
        for api in hostapis:
            if default_in < 0 and api["default_input_device"] >= 0:
                default_in = int(api["default_input_device"])
            if default_out < 0 and api["default_output_device"] >= 0:
                default_out = int(api["default_output_device"])
    devices = [
        DeviceInfo(
            index=int(d["index"]),
            name=str(d["name"]),
            hostapi=str(hostapis[d["hostapi"]]["name"]),
            max_input_channels=int(d["max_input_channels"]),
            max_output_channels=int(d["max_output_channels"]),
            default_samplerate=float(d["default_samplerate"]),
            default_low_output_latency=float(d["default_low_output_latency"]),
            is_default_input=int(d["index"]) == default_in,
            is_default_output=int(d["index"]) == default_out,
        )
        for d in raw
    ]
    return [d for d in devices if kind is None or d.supports(kind)]


def describe_devices(kind: Kind | None = None) -> str:
    devices = list_devices(kind)
    if not devices:
        return "  (no audio devices found)"
    return "\n".join("  " + d.describe() for d in devices)


def resolve_device(spec: str | int | None, kind: Kind) -> DeviceInfo:
    """Find a device by index, exact name, or a unique case-insensitive name fragment; None = the default.

    Raises NoDeviceError when there is no device of that kind at all, DeviceNotFoundError (listing the devices)
    when ``spec`` matches none or several.
    """
    devices = list_devices(kind)
    if not devices:
        raise NoDeviceError(
            f"no audio {kind} device found. PortAudio sees:\n{describe_devices()}\n"
            "On a headless machine start PulseAudio (see `voicecli doctor`), then retry."
        )
    if spec is None:
        default = next((d for d in devices if (d.is_default_output if kind == "output" else d.is_default_input)), None)
        return default if default is not None else devices[0]
    if isinstance(spec, int) or (isinstance(spec, str) and spec.strip().isdigit()):
        index = int(spec)
        match = next((d for d in devices if d.index == index), None)
        if match is None:
            raise DeviceNotFoundError(
                f"no {kind} device with index {index}. {kind.capitalize()} devices:\n{describe_devices(kind)}"
            )
        return match
    exact = [d for d in devices if d.name == spec]
    if len(exact) == 1:
        return exact[0]
    fragment = spec.lower()
    partial = [d for d in devices if fragment in d.name.lower()]
    if len(partial) == 1:
        return partial[0]
    why = "matches several" if partial else "matches no"
    raise DeviceNotFoundError(f"{spec!r} {why} {kind} device. {kind.capitalize()} devices:\n{describe_devices(kind)}")


# alsa-lib prints "ALSA lib pcm.c:...: underrun occurred" straight to stderr, where Textual draws. The handler has
# to stay referenced for as long as alsa-lib may call it.
_ALSA_HANDLER_TYPE = ctypes.CFUNCTYPE(
    None, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p
)


def _ignore_alsa_error(file: bytes | None, line: int, function: bytes | None, err: int, fmt: bytes | None) -> None:
    return None


_alsa_handler = _ALSA_HANDLER_TYPE(_ignore_alsa_error)
_alsa_silenced = False


def silence_alsa_errors() -> bool:
    """Install a no-op alsa-lib error handler (Linux). Returns False where alsa-lib is not present."""
    global _alsa_silenced
    if _alsa_silenced:
        return True
    name = ctypes.util.find_library("asound") or "libasound.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        return False
    lib.snd_lib_error_set_handler(_alsa_handler)
    _alsa_silenced = True
    return True
