"""What clients send, read and validated: the server's side of voicecli.wire.protocol.

The protocol's documentation (docs/protocol.md) is the rule book: every limit, default and error code there; this
module applies them to a WebSocket message or a POST /invocations body and raises ``ProtocolError`` with the code
the client gets back. It lives with the server because only the server reads client messages; the message types
themselves stay in the protocol, shared with clients. `shown` and `shown_error`, how the server quotes what a client
sent (and what failed) back in error frames and logs, live here: only the server quotes.
"""

from __future__ import annotations

import reprlib
import unicodedata
import urllib.parse
from collections.abc import Collection, Mapping
from typing import Any, Final, Literal

from voicecli.wire.protocol import (
    AUDIO_FORMATS,
    DEFAULTS,
    HTTP_AUDIO_FORMATS,
    SAMPLE_RATE,
    Cancel,
    ClientMessage,
    Close,
    ErrorCode,
    HttpAudioFormat,
    InvocationRequest,
    Limits,
    ProtocolError,
    RequestId,
    SynthesisRequest,
    decode_object,
    is_loopback_host,
)
from voicecli_endpoint.g2p import work_units

_SHOWN = reprlib.Repr(maxstring=40, maxlong=40, maxother=40, maxlevel=2, maxlist=3, maxdict=3)


def shown(value: Any) -> str:
    """A client-supplied value as quoted in an error message or a log line: its repr, cut to about 40 characters.

    Why: error frames and logs quote what the client sent, and a client can send 64 KiB of it.
    """
    return _SHOWN.repr(value)


def shown_error(exc: BaseException, limit: int = 160) -> str:
    """An exception as quoted to a client: its type and message, cut to `limit` characters.

    Why: a failure's message may quote the input that caused it (num2words quoted a 2,000-digit number whole).
    """
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _request_id(obj: Mapping[str, Any], limits: Limits = DEFAULTS.limits) -> RequestId | None:
    value = obj.get("request_id")
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, "request_id must be a string or an integer")
    if len(str(value)) > limits.max_request_id_chars:
        raise ProtocolError(
            ErrorCode.BAD_FIELD, f"request_id must be at most {limits.max_request_id_chars} characters long"
        )
    return value


def _lone_surrogate(text: str) -> int:
    """Index of the first lone surrogate in `text` (a JSON escape like \\ud800 makes one), or -1."""
    for index, char in enumerate(text):
        if "\ud800" <= char <= "\udfff":
            return index
    return -1


def is_blank(text: str) -> bool:
    """True when `text` has nothing visible: only whitespace, control and format (zero-width) characters."""
    return all(char.isspace() or unicodedata.category(char) in ("Cc", "Cf") for char in text)


def _text(obj: Mapping[str, Any], request_id: RequestId | None, limits: Limits, name: str = "text") -> str:
    text = obj.get(name)
    if text is None:
        raise ProtocolError(ErrorCode.EMPTY_TEXT, f"{name} is missing", request_id)
    if not isinstance(text, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"{name} must be a string", request_id)
    if is_blank(text):
        raise ProtocolError(
            ErrorCode.EMPTY_TEXT, f"{name} is empty or only whitespace, control or zero-width characters", request_id
        )
    if len(text) > limits.max_text_chars:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f"{name} has {len(text)} characters; the limit is {limits.max_text_chars}",
            request_id,
        )
    surrogate = _lone_surrogate(text)
    if surrogate >= 0:
        raise ProtocolError(
            ErrorCode.INVALID_UTF8,
            f"{name} holds a lone surrogate (U+{ord(text[surrogate]):04X}) at character {surrogate}: that is not "
            "Unicode text and has no UTF-8 encoding; send the text as UTF-8",
            request_id,
        )
    work = work_units(text)
    if work > limits.max_text_work:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f"{name} is too much to speak in one request: {work} words, marks, symbols and digits of long numbers; "
            f"the limit is {limits.max_text_work}: send it in shorter pieces",
            request_id,
        )
    return text


def _voice(obj: Mapping[str, Any], request_id: RequestId | None, voices: Collection[str] | None) -> str:
    voice = obj.get("voice")
    if voice is None:
        return DEFAULTS.voice
    if not isinstance(voice, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, "voice must be a string", request_id)
    if voices is not None and voice not in voices:
        raise ProtocolError(
            ErrorCode.UNKNOWN_VOICE,
            f"unknown voice {shown(voice)}; valid voices: {', '.join(sorted(voices))}",
            request_id,
        )
    return voice


def _speed(obj: Mapping[str, Any], request_id: RequestId | None, limits: Limits) -> float:
    speed = obj.get("speed")
    if speed is None:
        return DEFAULTS.speed
    if isinstance(speed, bool) or not isinstance(speed, int | float):
        raise ProtocolError(ErrorCode.BAD_SPEED, "speed must be a number", request_id)
    # Compared as given: an integer of hundreds of digits is out of range, not an OverflowError in float().
    if not limits.min_speed <= speed <= limits.max_speed:
        raise ProtocolError(
            ErrorCode.BAD_SPEED,
            f"speed {shown(speed)} is outside {limits.min_speed}..{limits.max_speed}",
            request_id,
        )
    return float(speed)


def _format[F: str](
    obj: Mapping[str, Any], request_id: RequestId | None, allowed: tuple[F, ...], default: F, name: str = "format"
) -> F:
    value = obj.get(name)
    if value is None:
        return default
    for candidate in allowed:
        if value == candidate:
            return candidate
    raise ProtocolError(
        ErrorCode.UNKNOWN_FORMAT, f"unknown {name} {shown(value)}; valid formats: {', '.join(allowed)}", request_id
    )


def _sample_rate(obj: Mapping[str, Any], request_id: RequestId | None) -> int | None:
    value = obj.get("sample_rate")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != SAMPLE_RATE:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_SAMPLE_RATE, f"sample_rate must be {SAMPLE_RATE}, got {shown(value)}", request_id
        )
    return SAMPLE_RATE


def _timestamp(obj: Mapping[str, Any], request_id: RequestId | None) -> float | str | None:
    value = obj.get("request_timestamp")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ProtocolError(ErrorCode.BAD_FIELD, "request_timestamp is out of range", request_id) from None
    raise ProtocolError(ErrorCode.BAD_FIELD, "request_timestamp must be a number or a string", request_id)


def _word_timings(obj: Mapping[str, Any], request_id: RequestId | None) -> bool:
    value = obj.get("word_timings", False)
    if not isinstance(value, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, f"word_timings must be true or false, got {shown(value)}", request_id)
    return value


_REQUEST_FIELDS = frozenset(
    {"type", "text", "voice", "speed", "request_id", "format", "request_timestamp", "sample_rate", "word_timings"}
)


def _synthesis_request(
    obj: Mapping[str, Any], voices: Collection[str] | None, limits: Limits
) -> SynthesisRequest:
    request_id = _request_id(obj, limits)
    return SynthesisRequest(
        text=_text(obj, request_id, limits),
        voice=_voice(obj, request_id, voices),
        speed=_speed(obj, request_id, limits),
        request_id=request_id,
        format=_format(obj, request_id, AUDIO_FORMATS, DEFAULTS.format),
        request_timestamp=_timestamp(obj, request_id),
        sample_rate=_sample_rate(obj, request_id),
        word_timings=_word_timings(obj, request_id),
        extra={k: v for k, v in obj.items() if k not in _REQUEST_FIELDS},
    )


def parse_client_message(
    data: str | bytes,
    *,
    voices: Collection[str] | None = None,
    limits: Limits = DEFAULTS.limits,
) -> ClientMessage:
    """Validate one client frame. `voices`, when given, are the valid voice names. Raises ProtocolError."""
    obj = decode_object(data, limits)
    kind = obj.get("type")
    if kind is None:
        if "text" not in obj:
            raise ProtocolError(
                ErrorCode.UNKNOWN_TYPE, "a message needs a 'type', or a 'text' to synthesize", _soft_id(obj, limits)
            )
        return _synthesis_request(obj, voices, limits)
    if kind == SynthesisRequest.TYPE:
        return _synthesis_request(obj, voices, limits)
    if kind == Cancel.TYPE:
        return Cancel(request_id=_request_id(obj, limits))
    if kind == Close.TYPE:
        return Close()
    raise ProtocolError(
        ErrorCode.UNKNOWN_TYPE,
        f"unknown message type {shown(kind)}; valid types: {SynthesisRequest.TYPE}, {Cancel.TYPE}, {Close.TYPE}",
        _soft_id(obj, limits),
    )


def _soft_id(obj: Mapping[str, Any], limits: Limits) -> RequestId | None:
    """The message's request_id for an error frame, or None when it has none worth echoing."""
    try:
        return _request_id(obj, limits)
    except ProtocolError:
        return None


def parse_invocation(
    data: bytes,
    *,
    voices: Collection[str] | None = None,
    limits: Limits = DEFAULTS.limits,
) -> InvocationRequest:
    """Validate a POST /invocations body with the same rules as a WebSocket request. Raises ProtocolError."""
    obj = decode_object(data, limits)
    stream = obj.get("stream", False)
    if not isinstance(stream, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, "stream must be true or false")
    return InvocationRequest(
        text=_text(obj, None, limits),
        voice=_voice(obj, None, voices),
        speed=_speed(obj, None, limits),
        format=_format(obj, None, HTTP_AUDIO_FORMATS, DEFAULTS.http_format),
        stream=stream,
    )


OpenAIFormat = Literal["mp3", "wav", "pcm"]
OPENAI_FORMATS: Final[tuple[OpenAIFormat, ...]] = ("mp3", "wav", "pcm")
_OPENAI_TO_HTTP: Final[dict[OpenAIFormat, HttpAudioFormat]] = {"mp3": "mp3", "wav": "wav", "pcm": "pcm16"}


def parse_openai_speech(
    data: bytes,
    *,
    voices: Collection[str] | None = None,
    limits: Limits = DEFAULTS.limits,
) -> InvocationRequest:
    """Validate a POST /v1/audio/speech body (OpenAI's shape, see docs/protocol.md) into the request
    POST /invocations would make of it, with the same rules and error codes. Raises ProtocolError."""
    obj = decode_object(data, limits)
    model = obj.get("model")
    if model is not None and not isinstance(model, str):
        raise ProtocolError(ErrorCode.BAD_FIELD, "model must be a string")
    stream = obj.get("stream", True)
    if not isinstance(stream, bool):
        raise ProtocolError(ErrorCode.BAD_FIELD, "stream must be true or false")
    stream_format = obj.get("stream_format", "audio")
    if stream_format != "audio":
        raise ProtocolError(ErrorCode.UNKNOWN_FORMAT,
                            f"stream_format {shown(stream_format)} is not served; valid: audio (raw audio bytes)")
    return InvocationRequest(
        text=_text(obj, None, limits, name="input"),
        voice=_voice(obj, None, voices),
        speed=_speed(obj, None, limits),
        format=_OPENAI_TO_HTTP[_format(obj, None, OPENAI_FORMATS, "mp3", name="response_format")],
        stream=stream,
    )


def origin_is_loopback(origin: str) -> bool:
    """Whether a browser's Origin header names a page served from this machine (http or https on a loopback host).

    A token-less endpoint accepts only these (or no Origin at all: programs other than browsers send none), so a
    web page the user happens to open cannot drive it from their browser.
    """
    parts = urllib.parse.urlsplit(origin.strip())
    return parts.scheme in ("http", "https") and parts.hostname is not None and is_loopback_host(parts.hostname)


def accept_requests_stream(accept: str | None) -> bool:
    """Whether an Accept header asks for a streamed response: any media range with the parameter stream=true."""
    if not accept:
        return False
    for media_range in accept.split(","):
        for parameter in media_range.split(";")[1:]:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "stream" and value.strip().strip('"').lower() == "true":
                return True
    return False
