"""Encoders: whole MP3 frames per binary frame, PCM16 framing, WAV."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from voicecli_endpoint.audio_encoding import (
    Mp3StreamEncoder,
    Pcm16StreamEncoder,
    RawPcm16StreamEncoder,
    WavStreamEncoder,
    stream_encoder,
    to_pcm16,
    wav_bytes,
    wav_header,
)

from tests.endpoint.helpers import assert_whole_mp3_frames, mp3_duration_s
from voicecli.wire.protocol import SAMPLE_RATE, PcmAudio, classify_frame


def tone(seconds: float, frequency: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=20_000), min_size=1, max_size=8))
def test_mp3_stream_sends_only_whole_frames_and_decodes_to_the_right_duration(chunk_sizes: list[int]) -> None:
    audio = tone(sum(chunk_sizes) / SAMPLE_RATE)
    encoder = Mp3StreamEncoder(max_message_bytes=4096)
    messages: list[bytes] = []
    offset = 0
    for size in chunk_sizes:
        messages += encoder.encode(audio[offset : offset + size])
        offset += size
    messages += encoder.flush()
    for message in messages:
        assert_whole_mp3_frames(message)  # starts with 0xFF, ends on a frame boundary
        assert len(message) <= 4096
    if len(audio) == 0:
        return
    # lame's encoder delay and end padding add at most a few frames (24 ms each)
    assert mp3_duration_s(messages) == pytest.approx(len(audio) / SAMPLE_RATE, abs=0.1)


def test_pcm16_frames_are_framed_and_bounded() -> None:
    audio = tone(1.0)
    messages = Pcm16StreamEncoder(max_message_bytes=10_000).encode(audio)
    assert all(len(m) <= 10_000 for m in messages)
    samples = b"".join(frame.samples for frame in map(classify_frame, messages) if isinstance(frame, PcmAudio))
    assert samples == to_pcm16(audio)


def test_to_pcm16_clips_instead_of_wrapping() -> None:
    values = np.frombuffer(to_pcm16(np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32)), dtype="<i2")
    assert values.tolist() == [-32767, -32767, 0, 32767, 32767]


def test_wav_bytes_is_a_valid_file() -> None:
    audio = tone(0.25)
    with wave.open(io.BytesIO(wav_bytes(audio))) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE, 1, 2)
        assert wav.readframes(wav.getnframes()) == to_pcm16(audio)


def test_streaming_wav_header_then_pcm() -> None:
    encoder = WavStreamEncoder()
    first, second = encoder.encode(tone(0.1)), encoder.encode(tone(0.1))
    assert first[0] == wav_header(None) and len(second) == 1
    assert struct.unpack_from("<I", first[0], 40)[0] == 0xFFFFFFFF
    assert WavStreamEncoder().flush() == [wav_header(None)]  # no audio at all still yields a header


def test_stream_encoder_choice() -> None:
    assert isinstance(stream_encoder("mp3"), Mp3StreamEncoder)
    assert isinstance(stream_encoder("pcm16"), Pcm16StreamEncoder)
    assert isinstance(stream_encoder("pcm16", http=True), RawPcm16StreamEncoder)
    assert isinstance(stream_encoder("wav", http=True), WavStreamEncoder)
    with pytest.raises(ValueError):
        stream_encoder("wav")
