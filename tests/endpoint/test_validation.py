"""voicecli_endpoint.validation: client messages and POST bodies read and validated by the protocol's rules."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from voicecli_endpoint.validation import (
    accept_requests_stream,
    is_blank,
    origin_is_loopback,
    parse_client_message,
    parse_invocation,
    parse_openai_speech,
)

from tests.request_schema import request_objects, to_json
from voicecli.wire.protocol import (
    DEFAULTS,
    Cancel,
    Close,
    Error,
    ErrorCode,
    InvocationRequest,
    Limits,
    ProtocolError,
    SynthesisRequest,
    encode_message,
    parse_server_message,
)

VOICES = ("af_heart", "am_michael", "bf_emma")


def parse(obj: Any, **kwargs: Any) -> Any:
    return parse_client_message(json.dumps(obj), voices=VOICES, **kwargs)


def error_of(data: str | bytes, **kwargs: Any) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_client_message(data, voices=VOICES, **kwargs)
    return caught.value


def test_aws_sample_shape_is_a_synthesis_request() -> None:
    message = parse({"text": "Hello.", "voice": "am_michael", "speed": 1.2, "request_id": "r1",
                     "request_timestamp": 1764400000.5})
    assert message == SynthesisRequest("Hello.", "am_michael", 1.2, "r1", "mp3", 1764400000.5)


def test_defaults_and_binary_frames() -> None:
    message = parse_client_message(b'{"text": "Hi."}', voices=VOICES)
    assert message == SynthesisRequest("Hi.", DEFAULTS.voice, 1.0, None, "mp3")


def test_unknown_fields_are_tolerated_and_kept() -> None:
    message = parse({"text": "Hi.", "client": "x", "sample_rate": 24000, "format": "pcm16"})
    assert isinstance(message, SynthesisRequest)
    assert message.extra == {"client": "x"} and message.sample_rate == 24000 and message.format == "pcm16"


def test_explicit_type_and_round_trip() -> None:
    request = SynthesisRequest("Hi.", "bf_emma", 0.8, 5, "pcm16", sample_rate=24000)
    assert parse_client_message(encode_message(request), voices=VOICES) == request


def test_word_timings_are_asked_for_with_a_boolean_only() -> None:
    asked = parse({"text": "Hi.", "word_timings": True})
    assert isinstance(asked, SynthesisRequest) and asked.word_timings and "word_timings" not in asked.extra
    assert parse_client_message(encode_message(asked), voices=VOICES) == asked
    plain = parse({"text": "Hi."})
    assert isinstance(plain, SynthesisRequest) and not plain.word_timings
    with pytest.raises(ProtocolError) as refused:
        parse({"text": "Hi.", "word_timings": "yes"})
    assert refused.value.code == ErrorCode.BAD_FIELD


def test_cancel_and_close() -> None:
    assert parse({"type": "cancel"}) == Cancel(None)
    assert parse({"type": "cancel", "request_id": "a"}) == Cancel("a")
    assert parse({"type": "close"}) == Close()
    assert parse_client_message(encode_message(Cancel(3))) == Cancel(3)


@pytest.mark.parametrize(
    ("data", "code"),
    [
        ("{nope", ErrorCode.MALFORMED_JSON),
        (b"\xff\xfe", ErrorCode.INVALID_UTF8),
        ("[1]", ErrorCode.NOT_AN_OBJECT),
        ('"text"', ErrorCode.NOT_AN_OBJECT),
        ('{"text": ""}', ErrorCode.EMPTY_TEXT),
        ('{"text": "  \\n "}', ErrorCode.EMPTY_TEXT),
        ('{"type": "synthesize"}', ErrorCode.EMPTY_TEXT),
        ('{"text": 5}', ErrorCode.BAD_FIELD),
        ('{"text": "Hi.", "voice": "zz"}', ErrorCode.UNKNOWN_VOICE),
        ('{"text": "Hi.", "voice": 1}', ErrorCode.BAD_FIELD),
        ('{"text": "Hi.", "speed": 0.49}', ErrorCode.BAD_SPEED),
        ('{"text": "Hi.", "speed": 2.01}', ErrorCode.BAD_SPEED),
        ('{"text": "Hi.", "speed": true}', ErrorCode.BAD_SPEED),
        ('{"text": "Hi.", "speed": "1"}', ErrorCode.BAD_SPEED),
        ('{"text": "Hi.", "speed": NaN}', ErrorCode.BAD_SPEED),
        ('{"text": "Hi.", "format": "wav"}', ErrorCode.UNKNOWN_FORMAT),
        ('{"text": "Hi.", "request_id": [1]}', ErrorCode.BAD_FIELD),
        ('{"text": "Hi.", "request_id": true}', ErrorCode.BAD_FIELD),
        ('{"text": "Hi.", "sample_rate": 16000}', ErrorCode.UNSUPPORTED_SAMPLE_RATE),
        ('{"text": "Hi.", "request_timestamp": {}}', ErrorCode.BAD_FIELD),
        ('{"type": "dance"}', ErrorCode.UNKNOWN_TYPE),
        ("{}", ErrorCode.UNKNOWN_TYPE),
    ],
)
def test_bad_messages(data: str | bytes, code: ErrorCode) -> None:
    assert error_of(data).code == code


def test_text_limit_is_inclusive_and_configurable() -> None:
    assert isinstance(parse({"text": "a" * DEFAULTS.limits.max_text_chars}), SynthesisRequest)
    assert error_of(json.dumps({"text": "a" * 2001})).code == ErrorCode.TEXT_TOO_LONG
    assert error_of(json.dumps({"text": "abcdef"}), limits=Limits(max_text_chars=5)).code == ErrorCode.TEXT_TOO_LONG


def test_frame_size_is_checked_before_decoding() -> None:
    small = Limits(max_frame_bytes=16)
    assert error_of(b"\xff" * 17, limits=small).code == ErrorCode.FRAME_TOO_LARGE
    assert error_of("é" * 9, limits=small).code == ErrorCode.FRAME_TOO_LARGE  # 18 bytes in UTF-8


def test_errors_carry_the_request_id_when_readable() -> None:
    error = error_of('{"text": "Hi.", "voice": "zz", "request_id": "abc"}')
    assert error.request_id == "abc"
    assert "af_heart, am_michael, bf_emma" in error.message
    assert Error.from_protocol_error(error) == Error("unknown_voice", error.message, "abc")


def test_no_voice_check_without_a_voice_list() -> None:
    message = parse_client_message('{"text": "Hi.", "voice": "anything"}')
    assert isinstance(message, SynthesisRequest) and message.voice == "anything"


def test_invocation_body() -> None:
    body = parse_invocation(b'{"text": "Hi.", "format": "mp3", "stream": true}', voices=VOICES)
    assert body == InvocationRequest("Hi.", DEFAULTS.voice, 1.0, "mp3", True)
    assert parse_invocation(b'{"text": "Hi."}').format == "wav"
    with pytest.raises(ProtocolError) as caught:
        parse_invocation(b'{"text": "Hi.", "format": "ogg"}')
    assert caught.value.code == ErrorCode.UNKNOWN_FORMAT


@pytest.mark.parametrize(
    ("accept", "expected"),
    [(None, False), ("audio/mpeg", False), ("audio/mpeg; stream=true", True), ("*/*, audio/wav;stream=TRUE", True),
     ("audio/wav; stream=false", False)],
)
def test_accept_header_streaming(accept: str | None, expected: bool) -> None:
    assert accept_requests_stream(accept) is expected


@given(st.text(min_size=1, max_size=50).filter(lambda text: not is_blank(text)), st.sampled_from(VOICES),
       st.floats(min_value=0.5, max_value=2.0),
       st.one_of(st.none(), st.text(max_size=10), st.integers(-(2**63), 2**63)))
def test_any_valid_request_round_trips(text: str, voice: str, speed: float, request_id: str | int | None) -> None:
    request = SynthesisRequest(text, voice, speed, request_id)
    assert parse_client_message(encode_message(request), voices=VOICES) == request


def test_an_echoed_lone_surrogate_is_still_sendable_and_round_trips() -> None:
    """A client can send "\\udfff" as a JSON escape; the error frame that echoes it must encode as UTF-8."""
    error = error_of('{"request_id": "a\\udfffb", "speed": 9}')
    text = encode_message(Error.from_protocol_error(error))
    text.encode("utf-8")  # raises if a surrogate slipped through
    assert parse_server_message(text).request_id == "a\udfffb"


# ---------------------------------------------------------------------------------------------------- hardening
# (issue 17: inputs an outside probe found that escaped the protocol's own errors)

HUGE_INT = "9" * 5000


@pytest.mark.parametrize("field", ["text", "voice", "speed", "request_id", "format", "sample_rate",
                                   "request_timestamp", "type", "anything"])
def test_an_integer_too_long_to_read_is_malformed_json_on_both_routes(field: str) -> None:
    data = '{"text": "Hi.", "' + field + '": ' + HUGE_INT + "}"
    assert error_of(data).code == ErrorCode.MALFORMED_JSON
    with pytest.raises(ProtocolError) as caught:
        parse_invocation(data.encode())
    assert caught.value.code == ErrorCode.MALFORMED_JSON and "4300 digits" in caught.value.message


@pytest.mark.parametrize("frame", ['{"a":' * 1495 + "1" + "}" * 1495, "[" * 1495 + "]" * 1495,
                                   '{"text": "Hi.", "x": ' + "[" * 65 + "]" * 65 + "}"])
def test_deep_nesting_is_refused_by_its_depth_whoever_parses_it(frame: str) -> None:
    """The same frame gets the same answer wherever it is parsed. json.loads alone refuses nesting only when the C
    stack runs out, which depends on the caller (measured in a plain interpreter: 1,497 levels at the top of a
    thread, 1,493 inside an asyncio task, as the server parses): the fuzz test's oracle and the server disagreed on
    a frame in between."""

    async def in_a_task() -> ProtocolError:
        return error_of(frame)

    top, deep = error_of(frame), asyncio.run(in_a_task())
    assert top.code == deep.code == ErrorCode.MALFORMED_JSON and "deeper than 64 levels" in top.message
    with pytest.raises(ProtocolError) as caught:
        parse_invocation(frame.encode())
    assert caught.value.code == ErrorCode.MALFORMED_JSON


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    message = parse({"text": "[{" * 100 + '"\\' + "}]" * 100, "request_id": "r"})
    assert isinstance(message, SynthesisRequest) and message.text.startswith("[{[{")
    at_limit = '{"text": "Hi.", "x": ' + "[" * 63 + "]" * 63 + "}"  # 64 levels with the object: read
    assert isinstance(parse_client_message(at_limit, voices=VOICES), SynthesisRequest)


def test_numbers_past_float_range_are_field_errors_not_overflows() -> None:
    big = "9" * 400
    assert error_of('{"text": "Hi.", "speed": ' + big + "}").code == ErrorCode.BAD_SPEED
    assert error_of('{"text": "Hi.", "speed": -' + big + "}").code == ErrorCode.BAD_SPEED
    assert error_of('{"text": "Hi.", "request_timestamp": ' + big + "}").code == ErrorCode.BAD_FIELD
    assert error_of('{"text": "Hi.", "sample_rate": ' + big + "}").code == ErrorCode.UNSUPPORTED_SAMPLE_RATE
    assert "..." in error_of('{"text": "Hi.", "speed": ' + big + "}").message  # quoted, cut short


@pytest.mark.parametrize("text", ["\\ud800", "Hello \\udfff world", "\\udc80."])
def test_a_lone_surrogate_in_text_is_invalid_text_on_both_routes(text: str) -> None:
    data = '{"text": "' + text + '", "request_id": "s"}'
    error = error_of(data)
    assert (error.code, error.request_id) == (ErrorCode.INVALID_UTF8, "s") and "lone surrogate" in error.message
    with pytest.raises(ProtocolError) as caught:
        parse_invocation(data.encode())
    assert caught.value.code == ErrorCode.INVALID_UTF8


@pytest.mark.parametrize("text", ["\u200b", "\u200b\u200d\ufeff", " \x00\x1b ", "\u2028\u202e"])
def test_text_of_only_invisible_characters_is_empty(text: str) -> None:
    assert error_of(json.dumps({"text": text})).code == ErrorCode.EMPTY_TEXT
    with pytest.raises(ProtocolError) as caught:
        parse_invocation(json.dumps({"text": text}).encode())
    assert caught.value.code == ErrorCode.EMPTY_TEXT


def test_client_strings_are_quoted_cut_short_in_errors() -> None:
    for obj in ({"type": "x" * 60_000}, {"text": "Hi.", "format": "y" * 60_000},
                {"text": "Hi.", "voice": "z" * 60_000}, {"text": "Hi.", "sample_rate": "w" * 60_000}):
        error = error_of(json.dumps(obj), limits=Limits(max_frame_bytes=1 << 20))
        assert len(error.message) < 700, (error.code, len(error.message))  # the voice list is ~500 characters


def test_a_request_id_is_at_most_128_characters() -> None:
    assert parse({"text": "Hi.", "request_id": "r" * 128}).request_id == "r" * 128
    error = error_of(json.dumps({"text": "Hi.", "request_id": "r" * 129}))
    assert error.code == ErrorCode.BAD_FIELD and error.request_id is None
    assert error_of(json.dumps({"text": "Hi.", "request_id": 10**130})).code == ErrorCode.BAD_FIELD


@pytest.mark.parametrize(("origin", "loopback"), [
    ("http://localhost:3000", True), ("http://127.0.0.1:8080", True), ("https://[::1]", True),
    ("http://evil.example", False), ("http://localhost.evil.example", False), ("null", False),
    ("file://", False), ("http://127.0.0.1.evil.example", False), ("", False),
])
def test_loopback_origins(origin: str, loopback: bool) -> None:
    assert origin_is_loopback(origin) is loopback


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), binary=st.booleans())
def test_every_request_over_the_schema_is_a_message_or_a_protocol_error(data: st.DataObject, binary: bool) -> None:
    """The property the endpoint's session relies on: validation never raises anything but ProtocolError, and
    the error it produces always encodes into a sendable frame of reasonable size."""
    http = data.draw(st.booleans())
    frame = to_json(data.draw(request_objects(VOICES, http=http)))
    try:
        if http:
            parse_invocation(frame.encode("utf-8", "surrogatepass"))
        else:
            parse_client_message(frame.encode() if binary else frame, voices=VOICES)
    except ProtocolError as exc:
        reply = encode_message(Error.from_protocol_error(exc))
        assert len(reply.encode("utf-8")) < 1000, reply[:200]


def test_openai_speech_body_is_an_invocation() -> None:
    """OpenAI's shape: input for text, response_format (pcm is pcm16), stream on unless turned off."""
    body = parse_openai_speech(b'{"model": "tts-1", "input": "Hi.", "voice": "bf_emma", "speed": 1.5, '
                               b'"instructions": "cheerful"}', voices=VOICES)
    assert body == InvocationRequest("Hi.", "bf_emma", 1.5, "mp3", True)
    assert parse_openai_speech(b'{"input": "Hi.", "response_format": "pcm", "stream": false}') == \
        InvocationRequest("Hi.", DEFAULTS.voice, 1.0, "pcm16", False)
    assert parse_openai_speech(b'{"input": "Hi.", "response_format": "wav"}').format == "wav"


@pytest.mark.parametrize(("body", "code", "words"), [
    (b'{"model": "tts-1", "voice": "af_heart"}', ErrorCode.EMPTY_TEXT, "input is missing"),
    (b'{"input": 5}', ErrorCode.BAD_FIELD, "input must be a string"),
    (b'{"input": "Hi.", "voice": "alloy"}', ErrorCode.UNKNOWN_VOICE, "af_heart"),
    (b'{"input": "Hi.", "response_format": "opus"}', ErrorCode.UNKNOWN_FORMAT, "mp3, wav, pcm"),
    (b'{"input": "Hi.", "speed": 4.0}', ErrorCode.BAD_SPEED, "0.5..2.0"),
    (b'{"input": "Hi.", "stream": "yes"}', ErrorCode.BAD_FIELD, "stream"),
    (b'{"input": "Hi.", "stream_format": "sse"}', ErrorCode.UNKNOWN_FORMAT, "audio"),
    (b'{"input": "Hi.", "model": 3}', ErrorCode.BAD_FIELD, "model"),
    (b'["Hi."]', ErrorCode.NOT_AN_OBJECT, "object"),
])
def test_bad_openai_speech_bodies_get_the_usual_codes(body: bytes, code: ErrorCode, words: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_openai_speech(body, voices=VOICES)
    assert caught.value.code == code and words in caught.value.message


@pytest.mark.parametrize("text", ["😀" * 2000, "9" * 1999, " ".join(["a-a-a-a"] * 250)[:2000]])
def test_a_text_that_costs_too_much_g2p_is_refused_before_any_audio(text: str) -> None:
    """Issue 23: 2,000 characters of emoji, digits or joined word groups cost up to ~10x ordinary text in G2P (and
    before the groups were cut, seconds): the work bound refuses them as text_too_long, naming the bound."""
    with pytest.raises(ProtocolError) as caught:
        parse({"text": text, "request_id": 1})
    assert caught.value.code is ErrorCode.TEXT_TOO_LONG and caught.value.request_id == 1
    assert f"limit is {DEFAULTS.limits.max_text_work}" in str(caught.value) and len(str(caught.value)) < 200


def test_ordinary_text_of_the_longest_length_is_well_within_the_work_bound() -> None:
    text = ("The quick brown fox jumps over the lazy dog, and then it runs far away, doesn't it? " * 30)[:2000]
    assert isinstance(parse({"text": text}), SynthesisRequest)
    assert isinstance(parse({"text": "9" * 307}), SynthesisRequest)  # spelled digit by digit (g2p.MAX_NUMBER_DIGITS)
