"""Float samples from an engine -> the bytes a client receives: MP3, framed PCM16 or WAV.

Streaming encoders emit only WHOLE units: an MP3 binary frame always holds complete MP3 frames (lame's partial
tail is kept until the next chunk or the flush), so every frame a client receives decodes on its own and
starts with the 0xFF sync byte that `voicecli.wire.protocol.classify_frame` relies on.
"""

from __future__ import annotations

import io
import struct
import wave
from typing import Protocol

import numpy as np

from voicecli.audio.mp3_frames import split_frames
from voicecli.wire.protocol import SAMPLE_RATE, encode_pcm_frame
from voicecli_endpoint.engines.base import Audio

DEFAULT_MP3_KBPS = 64
DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024
"""Largest binary message sent: big enough to keep the frame count low, small enough for any transport."""


def to_pcm16(audio: Audio) -> bytes:
    """float32 in [-1, 1] -> signed 16-bit little-endian bytes (clipped, not wrapped)."""
    clipped = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


class StreamEncoder(Protocol):
    """Encodes one request's audio chunk by chunk into ready-to-send binary messages."""

    def encode(self, audio: Audio) -> list[bytes]: ...

    def flush(self) -> list[bytes]: ...


def _group(units: list[bytes], max_bytes: int) -> list[bytes]:
    """Concatenate whole units into messages of at most `max_bytes` (a unit is never split)."""
    messages: list[bytes] = []
    current = bytearray()
    for unit in units:
        if current and len(current) + len(unit) > max_bytes:
            messages.append(bytes(current))
            current = bytearray()
        current += unit
    if current:
        messages.append(bytes(current))
    return messages


class Mp3StreamEncoder:
    """Incremental MPEG-2 Layer III at 24 kHz mono through lameenc, emitting whole frames only."""

    def __init__(self, bitrate_kbps: int = DEFAULT_MP3_KBPS, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 quality: int = 5) -> None:
        import lameenc

        self._lame = lameenc.Encoder()
        self._lame.set_bit_rate(bitrate_kbps)
        self._lame.set_in_sample_rate(SAMPLE_RATE)
        self._lame.set_out_sample_rate(SAMPLE_RATE)
        self._lame.set_channels(1)
        self._lame.set_quality(quality)  # 2 best .. 7 fastest; 5 is lame's default trade-off
        self._pending = b""
        self._max = max_message_bytes
        self._started = False

    def _emit(self, data: bytes) -> list[bytes]:
        frames, self._pending = split_frames(self._pending + data)
        return _group(frames, self._max)

    def encode(self, audio: Audio) -> list[bytes]:
        pcm = to_pcm16(audio)
        if not pcm:
            return []
        self._started = True
        return self._emit(bytes(self._lame.encode(pcm)))

    def flush(self) -> list[bytes]:
        """The tail of the stream. A stream that never received a sample is empty: lame refuses to flush
        before it has encoded anything ("Not currently encoding"), and text with nothing speakable in it
        (only punctuation, say) makes no audio at all."""
        if not self._started:
            return []
        messages = self._emit(bytes(self._lame.flush()))
        if self._pending:
            raise ValueError(f"lame left {len(self._pending)} bytes that are not a whole MP3 frame")
        return messages


class Pcm16StreamEncoder:
    """PCM16 in the protocol's binary framing (magic + length + samples), one message per chunk or less."""

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._max_samples_bytes = max(2, (max_message_bytes - 8) // 2 * 2)

    def encode(self, audio: Audio) -> list[bytes]:
        pcm = to_pcm16(audio)
        step = self._max_samples_bytes
        return [encode_pcm_frame(pcm[i : i + step]) for i in range(0, len(pcm), step)]

    def flush(self) -> list[bytes]:
        return []


class RawPcm16StreamEncoder:
    """Unframed PCM16 for HTTP streaming, where the body is one byte stream anyway."""

    def encode(self, audio: Audio) -> list[bytes]:
        pcm = to_pcm16(audio)
        return [pcm] if pcm else []

    def flush(self) -> list[bytes]:
        return []


def wav_header(num_samples: int | None) -> bytes:
    """A 44-byte PCM16 mono 24 kHz WAV header; unknown length (streaming) writes the 0xFFFFFFFF placeholders."""
    data_bytes = 0xFFFFFFFF if num_samples is None else num_samples * 2
    riff_bytes = 0xFFFFFFFF if num_samples is None else 36 + data_bytes
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", riff_bytes, b"WAVE", b"fmt ", 16, 1, 1, SAMPLE_RATE, SAMPLE_RATE * 2, 2, 16, b"data", data_bytes,
    )


class WavStreamEncoder(RawPcm16StreamEncoder):
    """A streaming WAV: the header with unknown sizes first, then raw PCM16."""

    def __init__(self) -> None:
        self._header_sent = False

    def encode(self, audio: Audio) -> list[bytes]:
        out = [] if self._header_sent else [wav_header(None)]
        self._header_sent = True
        return out + super().encode(audio)

    def flush(self) -> list[bytes]:
        return [] if self._header_sent else [wav_header(None)]


def wav_bytes(audio: Audio) -> bytes:
    """A whole WAV file (PCM16 mono 24 kHz) for batch responses."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(SAMPLE_RATE)
        wav.writeframes(to_pcm16(audio))
    return out.getvalue()


def mp3_bytes(audio: Audio, bitrate_kbps: int = DEFAULT_MP3_KBPS) -> bytes:
    """A whole MP3 stream for batch responses."""
    encoder = Mp3StreamEncoder(bitrate_kbps, max_message_bytes=1 << 30)
    return b"".join(encoder.encode(audio) + encoder.flush())


def stream_encoder(fmt: str, *, http: bool = False, mp3_kbps: int = DEFAULT_MP3_KBPS) -> StreamEncoder:
    """The streaming encoder for a protocol format. Over HTTP pcm16 is unframed and wav is allowed."""
    if fmt == "mp3":
        return Mp3StreamEncoder(mp3_kbps)
    if fmt == "pcm16":
        return RawPcm16StreamEncoder() if http else Pcm16StreamEncoder()
    if fmt == "wav" and http:
        return WavStreamEncoder()
    raise ValueError(f"no streaming encoder for format {fmt!r}")
