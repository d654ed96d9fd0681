"""The endpoint's audio streams, per format: the aligner that re-cuts them into whole units, the decoder that turns
them into samples. Every transport, the pipeline, `say` and the benches take theirs from here, so there is one
answer to "how is an mp3 / pcm16 answer carried and decoded"."""

from __future__ import annotations

from typing import Protocol

from voicecli.audio.mp3_decode import LAME_TOTAL_DELAY, Mp3StreamDecoder
from voicecli.audio.mp3_frames import Mp3FrameSplitter
from voicecli.audio.pcm import Pcm16Aligner, Pcm16Decoder, Samples

__all__ = ["Aligner", "StreamDecoder", "aligner_for", "answer_decoder"]


class Aligner(Protocol):
    def feed(self, data: bytes) -> bytes:
        """Bytes that now form whole units (possibly empty); the rest is kept for the next call."""
        ...

    def flush(self) -> int:
        """End of stream: how many trailing bytes were left over (an incomplete unit, discarded)."""
        ...


class StreamDecoder(Protocol):
    def feed(self, chunk: bytes) -> Samples:
        """The samples completed by `chunk` (cut anywhere); the rest waits for the next call."""
        ...

    def flush(self) -> Samples:
        """End of stream: what is left to play."""
        ...


def aligner_for(audio_format: str) -> Aligner:
    """Whole MP3 frames or whole PCM16 samples out of a byte stream cut anywhere (SageMaker's response stream)."""
    return Mp3FrameSplitter() if audio_format == "mp3" else Pcm16Aligner()


def answer_decoder(audio_format: str) -> StreamDecoder:
    """One request's decoder. PCM16: a sample split between chunks is carried, not dropped. MP3: the endpoint's is
    lameenc streamed without an Info frame, so LAME's 1105-sample codec delay is dropped here (46 ms sooner to the
    first sound; tests/audio/test_mp3_decode.py pins it to the sample)."""
    if audio_format == "pcm16":
        return Pcm16Decoder()
    return Mp3StreamDecoder(lame_delay_without_info_frame=LAME_TOTAL_DELAY)
