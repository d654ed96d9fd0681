"""WAV files in and out: an answer saved with --out, a spoken question read with --wav."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from voicecli.audio.pcm import Samples
from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.resample import resample
from voicecli.wire.protocol import SAMPLE_RATE


def save_wav(path: Path, samples: Samples, rate: int = SAMPLE_RATE) -> None:
    """Mono float32 samples as a 16-bit PCM WAV file (the endpoint's 24 kHz unless `rate` says otherwise)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())


def load_wav_16k(path: Path) -> Samples:
    """A WAV file as 16 kHz mono float32, the rate Whisper and the endpointer work at."""
    import soundfile

    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError) as exc:
        raise OSError(f"cannot read {path} as audio: {exc}") from exc
    mono = np.ascontiguousarray(data.mean(axis=1), dtype=np.float32)
    return resample(mono, int(rate), SPEECH_RATE) if rate != SPEECH_RATE else mono
