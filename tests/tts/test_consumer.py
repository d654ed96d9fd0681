"""The one reader of transport events: bookkeeping, hooks, and waking without polling."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voicecli.tts.base import AudioChunk, AudioDone, AudioFailed, AudioStart
from voicecli.tts.consumer import AudioConsumer, RequestAudio, Samples, Stalled
from voicecli.tts.http_batch import BatchHttpTransport
from voicecli.wire.protocol import Timings


class Pcm:
    """PCM16 as it comes (the real decoders have their own tests)."""

    def __init__(self, audio_format: str = "pcm16") -> None:
        self.format = audio_format

    def feed(self, data: bytes) -> Samples:
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0

    def flush(self) -> Samples:
        return np.ones(2, np.float32)  # a recognisable tail


class Recording(AudioConsumer):
    def __init__(self, transport: BatchHttpTransport, stall_s: float = 5.0) -> None:
        super().__init__(transport, stall_s, Pcm)
        self.calls: list[str] = []

    def first_byte(self, entry: RequestAudio) -> None:
        self.calls.append(f"first_byte {entry.request_id}")

    def audio(self, entry: RequestAudio, samples: Samples) -> None:
        self.calls.append(f"audio {entry.request_id} {samples.size}")

    def finished(self, entry: RequestAudio) -> None:
        self.calls.append(f"finished {entry.request_id}")

    def failed(self, entry: RequestAudio | None, event: AudioFailed) -> None:
        self.calls.append(f"failed {None if entry is None else entry.request_id} {event.code}")


def transport() -> BatchHttpTransport:
    return BatchHttpTransport("http://127.0.0.1:9")  # never connected: its event queue is fed by hand


async def test_a_set_is_followed_to_the_end_with_every_hook_in_order() -> None:
    source = transport()
    reader = Recording(source)
    reader.track("a")
    reader.track("b")
    reader.close()
    timings = Timings(queue_wait_ms=1.0, synthesis_ms=2.0, encoding_ms=0.0, audio_s=0.5)
    for event in (AudioStart("a", "pcm16", 24000), AudioChunk("a", b"\x00\x01" * 4), AudioChunk("a", b"\x00\x01"),
                  AudioDone("a", timings), AudioStart("b", "pcm16", 24000), AudioFailed("b", "boom", "no")):
        source._emit(event)
    await asyncio.wait_for(reader.run(), 5)
    assert reader.calls == ["first_byte a", "audio a 4", "audio a 1", "audio a 2", "finished a", "failed b boom"]
    a = reader.requests["a"]
    assert a.bytes == 10 and a.chunks == 2 and a.samples == 7 and a.timings == timings
    assert a.first_byte is not None and a.done is not None and a.first_byte <= a.done
    assert reader.requests["b"].failure is not None and reader.pending == []
    assert reader.start_order == ["a", "b"] and reader.done_order == ["a"] and reader.strays == 0


async def test_strays_and_repeats_are_counted_not_delivered() -> None:
    source = transport()
    reader = Recording(source)
    reader.track("a")
    reader.close()
    for event in (AudioChunk("zzz", b"\x00\x00"), AudioFailed("zzz", "late", "a cancelled one"),
                  AudioFailed(None, "session", "about the session"), AudioStart("a", "pcm16", 24000),
                  AudioDone("a", None)):
        source._emit(event)
    await asyncio.wait_for(reader.run(), 5)
    source._emit(AudioStart("a", "pcm16", 24000))  # a repeat after the end: counted when it is read
    source._emit(AudioChunk("a", b"\x00\x00"))
    reader.dispatch(await source.next_event(1))
    reader.dispatch(await source.next_event(1))
    assert reader.calls == ["failed None late", "failed None session", "audio a 2", "finished a"]
    assert reader.requests["a"].starts == 2 and reader.start_order == ["a", "a"] and reader.strays == 2


async def test_close_wakes_a_reader_with_nothing_outstanding_at_once() -> None:
    reader = Recording(transport())
    running = asyncio.create_task(reader.run())
    await asyncio.sleep(0.05)
    assert not running.done()  # nothing tracked, not closed: it waits (for the LLM's next sentence)
    reader.close()
    await asyncio.wait_for(running, 0.5)


async def test_forget_drops_the_outstanding_requests_and_their_late_audio() -> None:
    source = transport()
    reader = Recording(source)
    reader.track("a")
    running = asyncio.create_task(reader.run())
    source._emit(AudioStart("a", "pcm16", 24000))
    await asyncio.sleep(0.05)
    reader.forget()
    reader.close()
    await asyncio.wait_for(running, 0.5)
    source._emit(AudioChunk("a", b"\x00\x00"))
    reader.dispatch(await source.next_event(1))
    assert reader.calls == [] and reader.strays == 1


async def test_silence_while_a_request_is_outstanding_is_a_stall_but_waiting_for_sentences_is_not() -> None:
    source = transport()
    reader = Recording(source, stall_s=0.2)
    running = asyncio.create_task(reader.run())
    await asyncio.sleep(0.4)  # nothing outstanding: no stall however long it takes
    assert not running.done()
    reader.track("a")
    with pytest.raises(Stalled, match="1 request"):
        await asyncio.wait_for(running, 2)
    source._emit(AudioDone("a", None))  # the event the stalled reader did not take is still there for the next
    assert isinstance(await source.next_event(1), AudioDone)


async def test_each_request_is_decoded_in_the_format_its_start_announces() -> None:
    """The endpoint's AudioStart decides the format (asked mp3, answered pcm16: pcm16 is decoded); audio arriving
    without a start is decoded in the format asked for."""
    made: list[str] = []

    def decoder(audio_format: str) -> Pcm:
        made.append(audio_format)
        return Pcm(audio_format)

    source = transport()
    reader = AudioConsumer(source, 5.0, decoder, audio_format="mp3")
    reader.track("a")
    reader.track("b")
    reader.close()
    timings = Timings(queue_wait_ms=1.0, synthesis_ms=2.0, encoding_ms=0.0, audio_s=0.5)
    for event in (AudioStart("a", "pcm16", 24000), AudioChunk("a", b"\x00\x01"), AudioDone("a", timings),
                  AudioChunk("b", b"\x00\x01"), AudioDone("b", timings)):
        source._emit(event)
    await asyncio.wait_for(reader.run(), 5)
    assert made == ["pcm16", "mp3"]
