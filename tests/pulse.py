"""Test equipment: the private PulseAudio daemon lives in the product (voicecli.bench.virtual_audio, which `voicecli
bench turns` uses); this module re-exports it so the tests keep one short import and there is one copy."""

from voicecli.bench.virtual_audio import (
    MIC_SINK,
    MIC_SOURCE,
    SINK_RATE,
    SPEAKER_MONITOR,
    SPEAKER_SINK,
    PrivatePulse,
    PulseUnavailable,
    Recorder,
    write_wav_int16,
)

__all__ = ["MIC_SINK", "MIC_SOURCE", "SINK_RATE", "SPEAKER_MONITOR", "SPEAKER_SINK", "PrivatePulse",
           "PulseUnavailable", "Recorder", "write_wav_int16"]
