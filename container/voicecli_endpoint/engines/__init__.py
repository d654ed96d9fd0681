"""Synthesis engines behind one interface: `onnx` (kokoro-onnx, the CPU default) and `torch` (the kokoro package)."""

from __future__ import annotations

from voicecli_endpoint.engines.base import SAMPLE_RATE, Audio, Engine, UnknownVoiceError
from voicecli_endpoint.engines.select import ENGINE_NAMES, EngineName, load_engine, resolve_engine_name

__all__ = [
    "ENGINE_NAMES",
    "SAMPLE_RATE",
    "Audio",
    "Engine",
    "EngineName",
    "UnknownVoiceError",
    "load_engine",
    "resolve_engine_name",
]
