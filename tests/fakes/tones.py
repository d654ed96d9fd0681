"""Tone audio for the fakes: float samples, PCM16 bytes and whole MP3 frames, each made once per duration.

Why tones and not silence: the endpoint trims silence below -55 dBFS (voicecli_endpoint.synthesis) and the client's
levels, decoders and sinks treat an all-zero stream as nothing heard, so a fake must produce audible samples for
the code under test to behave as it does with speech. Why real MP3: the client decodes what it receives with its
own streaming decoder (voicecli.audio.mp3_decode), and a fake that sent anything but lameenc's frames would test
that decoder against a format the endpoint never sends. Encoding is the costly part (a few ms per second of
audio), so each duration is encoded once per test session and its frames reused.
"""

from __future__ import annotations

from functools import cache

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.mp3_frames import split_frames
from voicecli.wire.protocol import SAMPLE_RATE

TONE_HZ = 440.0
LEVEL = 0.3
"""About -13 dBFS peak: far above every silence gate, far below clipping."""
MP3_KBPS = 64
"""The endpoint's own bit rate (voicecli_endpoint.audio_encoding.DEFAULT_MP3_KBPS)."""


def tone(seconds: float, frequency_hz: float = TONE_HZ, rate: int = SAMPLE_RATE) -> NDArray[np.float32]:
    """A sine of `seconds` at `frequency_hz`, float32 mono in [-LEVEL, LEVEL]; the same call gives the same samples."""
    count = max(0, round(seconds * rate))
    t = np.arange(count, dtype=np.float64) / rate
    return (LEVEL * np.sin(2.0 * np.pi * frequency_hz * t)).astype(np.float32)


def pcm16(samples: NDArray[np.float32]) -> bytes:
    """float32 samples as signed 16-bit little-endian bytes, the wire's pcm16 format."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


@cache
def pcm16_tone(seconds: float) -> bytes:
    """`tone(seconds)` as PCM16 bytes (cached per duration)."""
    return pcm16(tone(seconds))


@cache
def mp3_tone(seconds: float) -> tuple[bytes, ...]:
    """`tone(seconds)` as whole MPEG-2 Layer III frames at 24 kHz mono, encoded once with lameenc the way the
    endpoint encodes a stream (no Info frame), so `voicecli.audio.streams.answer_decoder("mp3")` decodes it."""
    import lameenc

    encoder = lameenc.Encoder()
    encoder.set_bit_rate(MP3_KBPS)
    encoder.set_in_sample_rate(SAMPLE_RATE)
    encoder.set_out_sample_rate(SAMPLE_RATE)
    encoder.set_channels(1)
    encoder.set_quality(7)  # the fastest: the fakes need real frames, not the best sound
    data = bytes(encoder.encode(pcm16_tone(seconds))) + bytes(encoder.flush())
    frames, rest = split_frames(data)
    assert not rest, "lameenc ended inside a frame"
    return tuple(frames)
