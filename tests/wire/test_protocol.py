"""voicecli.wire.protocol: parsing, validation, server messages and frame classification."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicecli.wire.protocol import (
    PCM_MAGIC,
    CancelAck,
    Control,
    Error,
    Mp3Audio,
    PcmAudio,
    ProtocolError,
    ServerMessage,
    SynthesisComplete,
    SynthesisRequest,
    SynthesisStart,
    Timings,
    Words,
    WordTiming,
    classify_frame,
    decode_pcm_frame,
    encode_message,
    encode_pcm_frame,
    is_loopback_host,
    parse_server_message,
)


def test_server_messages_round_trip() -> None:
    timings = Timings(1.5, 200.25, 3.0, 1.25, 210.0, 2)
    messages: list[ServerMessage] = [
        SynthesisStart("a", "mp3", 24_000),
        SynthesisComplete(7, timings, 0.5),
        Error("unknown_voice", "no such voice", None),
        CancelAck(None, ("a", 7)),
    ]
    for message in messages:
        assert parse_server_message(encode_message(message)) == message


def test_synthesis_complete_keeps_the_aws_fields() -> None:
    obj = json.loads(encode_message(SynthesisComplete("a", Timings(1, 2, 3, 1.5), 0.75)))
    assert obj["total_duration_s"] == 1.5 and obj["elapsed_s"] == 0.75
    assert set(obj["timings"]) >= {"queue_wait_ms", "synthesis_ms", "encoding_ms", "audio_s"}


def test_bad_server_messages() -> None:
    with pytest.raises(ProtocolError):
        parse_server_message('{"type": "synthesis_start"}')
    with pytest.raises(ProtocolError):
        parse_server_message('{"type": "mystery"}')


def test_classify_frames() -> None:
    assert classify_frame('{"type":"cancelled","request_id":null,"dropped":[]}') == Control(CancelAck(None, ()))
    assert classify_frame(b'{"type":"cancelled","request_id":null,"dropped":[]}') == Control(CancelAck(None, ()))
    assert classify_frame(b"\xff\xf3\x84\xc4" + bytes(188)) == Mp3Audio(b"\xff\xf3\x84\xc4" + bytes(188))
    assert classify_frame(encode_pcm_frame(b"\x01\x00\x02\x00")) == PcmAudio(b"\x01\x00\x02\x00")
    with pytest.raises(ProtocolError):
        classify_frame(b"RIFF")
    with pytest.raises(ProtocolError):
        classify_frame(PCM_MAGIC + b"\x00\x00\x00\x04\x01\x00")  # announces 4 bytes, carries 2


@given(st.binary(max_size=2000).map(lambda b: b[: len(b) // 2 * 2]))
def test_pcm_frames_round_trip_and_are_never_json_or_mp3(samples: bytes) -> None:
    frame = encode_pcm_frame(samples)
    assert frame[:1] not in (b"{", b"\xff")
    assert decode_pcm_frame(frame) == samples
    classified = classify_frame(frame)
    assert isinstance(classified, PcmAudio) and classified.num_samples == len(samples) // 2


def test_odd_pcm_payload_is_refused() -> None:
    with pytest.raises(ValueError):
        encode_pcm_frame(b"\x01")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("LOCALHOST.", True), ("app.localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.4", False),
    ("example.com", False), ("localhost.example.com", False), ("", False),
])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback




def test_words_round_trip_and_are_asked_for_only_on_request() -> None:
    words = Words("r1", (WordTiming("Hello,", 0.0, 412.5), WordTiming("world.", 412.5, 980.0)))
    assert parse_server_message(encode_message(words)) == words
    assert json.loads(encode_message(words))["words"][0] == {"w": "Hello,", "start_ms": 0.0, "end_ms": 412.5}
    # An old client's request never names the field, so its server never sends a frame type it does not know.
    assert "word_timings" not in SynthesisRequest("Hi.").to_dict()
    assert SynthesisRequest("Hi.", word_timings=True).to_dict()["word_timings"] is True


@pytest.mark.parametrize("word", ['{"w": "a", "start_ms": 5, "end_ms": 2}', '{"w": "a", "start_ms": -1, "end_ms": 2}',
                                  '{"w": "a", "end_ms": 2}', '"a"'])
def test_bad_word_times_are_refused(word: str) -> None:
    with pytest.raises(ProtocolError):
        parse_server_message(f'{{"type": "words", "request_id": "r", "words": [{word}]}}')
