"""The receiver turns `words` frames into AudioWords: only for the request being answered, never twice for a re-sent
one; and the real endpoint app (tone engine) sends them only to a request that asked."""

from __future__ import annotations

import asyncio
import itertools

from tests.fakes.endpoint import InProcessEndpoint
from voicecli.tts.base import AudioChunk, AudioDone, AudioEvent, AudioStart, AudioWords, SpeechRequest
from voicecli.tts.receiver import Receiver
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import (
    SynthesisComplete,
    SynthesisStart,
    Timings,
    Words,
    WordTiming,
    encode_message,
)

ONE = (WordTiming("Hello,", 0.0, 400.0),)
TWO = (WordTiming("world.", 400.0, 900.0),)


def frame(message: Words | SynthesisStart | SynthesisComplete) -> str:
    return encode_message(message)


def test_words_of_the_request_being_answered_become_events() -> None:
    events: list[AudioEvent] = []
    receiver = Receiver(events.append)
    receiver.sent(SpeechRequest("r1", "Hello, world.", word_timings=True))
    receiver.handle(frame(Words("r1", ONE)))  # before its synthesis_start: not the one being answered
    receiver.handle(frame(SynthesisStart("r1", "mp3")))
    receiver.handle(frame(Words("r1", ONE)))
    receiver.handle(frame(Words("other", TWO)))  # a request never sent
    receiver.handle(frame(Words("r1", TWO)))
    receiver.handle(frame(SynthesisComplete("r1", Timings(0, 0, 0, 0.9), 1.0)))
    words = [e for e in events if isinstance(e, AudioWords)]
    assert [w.words for w in words] == [ONE, TWO] and all(w.request_id == "r1" for w in words)
    assert isinstance(events[-1], AudioDone)


async def test_a_re_sent_request_does_not_repeat_the_words_already_handed_on() -> None:
    events: list[AudioEvent] = []
    receiver = Receiver(events.append)
    receiver.sent(SpeechRequest("r1", "Hello, world.", word_timings=True))
    receiver.handle(frame(SynthesisStart("r1", "mp3")))
    receiver.handle(frame(Words("r1", ONE)))
    resent: list[str] = []

    async def send(message: str) -> None:
        resent.append(message)

    await receiver.resend(send)  # the carrier broke: the request is answered again from the start
    assert '"word_timings":true' in resent[0]
    receiver.handle(frame(SynthesisStart("r1", "mp3")))
    receiver.handle(frame(Words("r1", ONE)))
    receiver.handle(frame(Words("r1", TWO)))
    assert [e.words for e in events if isinstance(e, AudioWords)] == [ONE, TWO]


async def test_the_endpoint_sends_words_only_when_asked(fake_endpoint: InProcessEndpoint) -> None:
    """Over the real WebSocket to the real endpoint app: the words of every piece come, in order, tiling the
    request's audio; a request that did not ask (an old client) gets exactly the frames it always got."""
    text = "The first piece, cut at its clause. Then a second sentence here."
    async with WebSocketTransport(fake_endpoint.http_url) as transport:
        for rid, asked in (("timed", True), ("plain", False)):
            await transport.send(SpeechRequest(rid, text, format="pcm16", word_timings=asked))
            samples, words, kinds = 0, list[WordTiming](), list[type]()
            while not kinds or kinds[-1] is not AudioDone:
                event = await asyncio.wait_for(transport.next_event(), 30)
                kinds.append(type(event))
                if isinstance(event, AudioChunk):
                    samples += len(event.data) // 2
                elif isinstance(event, AudioWords):
                    words += event.words
            assert kinds[0] is AudioStart and AudioChunk in kinds
            if not asked:
                assert not words
                continue
            assert [w.w for w in words] == text.split()
            assert words[0].start_ms == 0 and all(a.end_ms == b.start_ms for a, b in itertools.pairwise(words))
            assert abs(words[-1].end_ms - samples * 1000 / 24_000) < 0.1  # they tile the audio sent
