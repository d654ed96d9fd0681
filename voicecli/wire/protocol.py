"""The voicecli TTS wire protocol, defined once for the Kokoro endpoint and every client.

docs/protocol.md is the protocol's documentation (routes, messages, frames, limits, error codes, access control);
this module defines its messages and frames once, for both sides. The server's reading and validation of client
messages lives with the server, in ``voicecli_endpoint/validation.py``.
"""

from __future__ import annotations

import ipaddress
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Final, Literal

SAMPLE_RATE: Final = 24_000
"""The only output rate: Kokoro-82M's."""

PING_PATH: Final = "/ping"
"""GET: 200 once the model is loaded and warm, 503 before (SageMaker's health check; clients poll it)."""
INVOCATIONS_PATH: Final = "/invocations"
"""POST: one synthesis, whole or streamed (see "HTTP route")."""
WS_PATH: Final = "/invocations-bidirectional-stream"
"""WebSocket: the session protocol (see "WebSocket route")."""
STATS_PATH: Final = "/stats"
"""GET: the engine, its sizes and counters (read by the benches)."""
OPENAI_SPEECH_PATH: Final = "/v1/audio/speech"
"""POST: OpenAI's speech API shape, so OpenAI TTS clients work unchanged (see "OpenAI-compatible route")."""

AudioFormat = Literal["mp3", "pcm16"]
"""Audio encodings of the WebSocket route."""
HttpAudioFormat = Literal["wav", "mp3", "pcm16"]
"""Audio encodings of POST /invocations."""
RequestId = str | int

AUDIO_FORMATS: Final[tuple[AudioFormat, ...]] = ("mp3", "pcm16")
HTTP_AUDIO_FORMATS: Final[tuple[HttpAudioFormat, ...]] = ("wav", "mp3", "pcm16")

PCM_MAGIC: Final = b"\x00PCM"
"""Start of a PCM16 audio frame: a NUL first, so neither JSON ('{') nor MP3 (0xFF)."""
_PCM_HEADER = struct.Struct(">4sI")
PCM_HEADER_BYTES: Final = _PCM_HEADER.size


@dataclass(frozen=True)
class Limits:
    """What the server accepts. Shared so a client can check before sending."""

    max_text_chars: int = 2000
    max_text_work: int = 1000
    """The most G2P work one text may take, in misaki subtokens after the endpoint prepares it (voicecli_endpoint.g2p):
    about one a word or punctuation mark, one a digit of a number too long to read as words, one a symbol or emoji.
    2,000 characters of ordinary English are ~450; the characters alone do not bound the cost (text_too_long)."""
    max_frame_bytes: int = 64 * 1024
    min_speed: float = 0.5
    max_speed: float = 2.0
    max_queued_requests: int = 64
    """Requests of one session waiting behind the one being answered; more are refused (queue_full)."""
    max_sessions: int = 32
    """Concurrent WebSocket sessions; more are refused at the handshake (too_many_sessions)."""
    idle_timeout_s: float = 300.0
    """A session with no message and no work for this long is closed (0: never)."""
    max_request_id_chars: int = 128
    """Longest request_id (its JSON text): it is echoed on every frame about the request, so it stays short."""


@dataclass(frozen=True)
class Defaults:
    """Values used when a request leaves a field out."""

    voice: str = "af_heart"
    speed: float = 1.0
    format: AudioFormat = "mp3"
    http_format: HttpAudioFormat = "wav"
    limits: Limits = field(default_factory=Limits)


DEFAULTS: Final = Defaults()


class ErrorCode(StrEnum):
    """Machine-readable reasons in error frames and HTTP error bodies."""

    INVALID_UTF8 = "invalid_utf8"
    MALFORMED_JSON = "malformed_json"
    NOT_AN_OBJECT = "not_an_object"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    UNKNOWN_VOICE = "unknown_voice"
    BAD_SPEED = "bad_speed"
    UNKNOWN_FORMAT = "unknown_format"
    UNKNOWN_TYPE = "unknown_type"
    FRAME_TOO_LARGE = "frame_too_large"
    BAD_FIELD = "bad_field"
    UNSUPPORTED_SAMPLE_RATE = "unsupported_sample_rate"
    # Raised by the server, not by parsing:
    QUEUE_FULL = "queue_full"
    UNAUTHORIZED = "unauthorized"
    TOO_MANY_SESSIONS = "too_many_sessions"
    IDLE_TIMEOUT = "idle_timeout"
    SESSION_CLOSING = "session_closing"
    NOT_READY = "not_ready"
    SYNTHESIS_FAILED = "synthesis_failed"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    INTERNAL_ERROR = "internal_error"
    # Raised by clients reading server frames:
    UNKNOWN_FRAME = "unknown_frame"


class ProtocolError(ValueError):
    """A message that breaks the protocol. `request_id` is the message's own when it could be read."""

    def __init__(self, code: ErrorCode, message: str, request_id: RequestId | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


# ----------------------------------------------------------------------------------------------------
# Client -> server messages


@dataclass(frozen=True)
class SynthesisRequest:
    """Speak `text`. Unknown fields the client sent are kept in `extra` (tolerated, never interpreted)."""

    TYPE: ClassVar[str] = "synthesize"

    text: str
    voice: str = DEFAULTS.voice
    speed: float = DEFAULTS.speed
    request_id: RequestId | None = None
    format: AudioFormat = DEFAULTS.format
    request_timestamp: float | str | None = None
    sample_rate: int | None = None
    word_timings: bool = False
    """Ask for a `words` frame after each piece's audio (see `Words`). Off by default, and then left out of the
    message: a client that never asks never receives a frame type it does not know."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "text": self.text,
            "voice": self.voice,
            "speed": self.speed,
            "format": self.format,
        }
        if self.request_id is not None:
            out["request_id"] = self.request_id
        if self.request_timestamp is not None:
            out["request_timestamp"] = self.request_timestamp
        if self.sample_rate is not None:
            out["sample_rate"] = self.sample_rate
        if self.word_timings:
            out["word_timings"] = True
        return out


@dataclass(frozen=True)
class Cancel:
    """Drop one request (or all of the session's when `request_id` is None), queued or in progress."""

    TYPE: ClassVar[str] = "cancel"

    request_id: RequestId | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "request_id": self.request_id}


@dataclass(frozen=True)
class Close:
    """Finish what was received, then close the session."""

    TYPE: ClassVar[str] = "close"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE}


ClientMessage = SynthesisRequest | Cancel | Close


# ----------------------------------------------------------------------------------------------------
# Server -> client messages


@dataclass(frozen=True)
class SynthesisStart:
    """Audio frames of `request_id` follow."""

    TYPE: ClassVar[str] = "synthesis_start"

    request_id: RequestId
    format: AudioFormat
    sample_rate: int = SAMPLE_RATE

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "request_id": self.request_id,
            "format": self.format,
            "sample_rate": self.sample_rate,
        }


@dataclass(frozen=True)
class Timings:
    """Where a request's time went, measured by the server."""

    queue_wait_ms: float
    synthesis_ms: float
    encoding_ms: float
    audio_s: float
    first_audio_ms: float | None = None
    chunks: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue_wait_ms": round(self.queue_wait_ms, 3),
            "synthesis_ms": round(self.synthesis_ms, 3),
            "encoding_ms": round(self.encoding_ms, 3),
            "audio_s": round(self.audio_s, 4),
            "first_audio_ms": None if self.first_audio_ms is None else round(self.first_audio_ms, 3),
            "chunks": self.chunks,
        }



def timing_headers(timings: Timings) -> dict[str, str]:
    """The headers of a whole POST /invocations answer that carry its timings (docs/protocol.md, "HTTP route"):
    written by the endpoint, read back by `timings_from_headers`, so both sides name them once."""
    return {
        "X-Inference-Time-Ms": f"{timings.synthesis_ms:.1f}",
        "X-Queue-Wait-Ms": f"{timings.queue_wait_ms:.1f}",
        "X-Audio-Seconds": f"{timings.audio_s:.3f}",
        "X-RTF": f"{timings.synthesis_ms / 1000 / timings.audio_s:.3f}" if timings.audio_s else "0",
    }


def timings_from_headers(headers: Mapping[str, str], elapsed_ms: float) -> Timings:
    """The timings a whole POST /invocations answer carries; without them (another server), the call's own time."""
    return Timings(queue_wait_ms=float(headers.get("X-Queue-Wait-Ms", 0)),
                   synthesis_ms=float(headers.get("X-Inference-Time-Ms", elapsed_ms)), encoding_ms=0.0,
                   audio_s=float(headers.get("X-Audio-Seconds", 0)))

@dataclass(frozen=True)
class SynthesisComplete:
    """Terminal frame of a request that was fully synthesized."""

    TYPE: ClassVar[str] = "synthesis_complete"

    request_id: RequestId
    timings: Timings
    elapsed_s: float

    @property
    def total_duration_s(self) -> float:
        """The AWS sample's name for the audio's length."""
        return self.timings.audio_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "request_id": self.request_id,
            "timings": self.timings.to_dict(),
            "total_duration_s": round(self.total_duration_s, 4),
            "elapsed_s": round(self.elapsed_s, 4),
        }


@dataclass(frozen=True)
class Error:
    """A rejected message or a failed request."""

    TYPE: ClassVar[str] = "error"

    code: str
    message: str
    request_id: RequestId | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "request_id": self.request_id, "code": self.code, "message": self.message}

    @classmethod
    def from_protocol_error(cls, error: ProtocolError) -> Error:
        return cls(code=str(error.code), message=error.message, request_id=error.request_id)


@dataclass(frozen=True)
class CancelAck:
    """Answer to a cancel: the ids of the requests that were dropped (possibly none)."""

    TYPE: ClassVar[str] = "cancelled"

    request_id: RequestId | None
    dropped: tuple[RequestId, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "request_id": self.request_id, "dropped": list(self.dropped)}


@dataclass(frozen=True)
class WordTiming:
    """One word of a request's text and when it is spoken, in ms from the start of that request's audio.

    Consecutive words tile the audio: a word ends where the next one starts (the pause after a word is its own), and
    the last word of a piece ends where the piece's audio ends. A word with no sound (a dash, an emoji) lasts 0 ms."""

    w: str
    start_ms: float
    end_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"w": self.w, "start_ms": round(self.start_ms, 1), "end_ms": round(self.end_ms, 1)}


@dataclass(frozen=True)
class Words:
    """The words of one piece of a request, sent after that piece's last audio frame and only to a request that
    asked (`SynthesisRequest.word_timings`). Why after: the piece's length is known only once its audio is complete
    (its trailing silence is trimmed as it arrives), and then every time is exact for the audio the client decodes."""

    TYPE: ClassVar[str] = "words"

    request_id: RequestId
    words: tuple[WordTiming, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.TYPE, "request_id": self.request_id, "words": [word.to_dict() for word in self.words]}


ServerMessage = SynthesisStart | SynthesisComplete | Error | CancelAck | Words


def encode_message(message: ClientMessage | ServerMessage) -> str:
    """The JSON text of a message, as sent in one WebSocket frame.

    Non-ASCII stays readable, except when a string holds a lone surrogate (a client may send one as a JSON
    escape, e.g. in a request_id that is echoed back): that cannot be encoded as UTF-8, so the message is then
    written with ASCII escapes, which decode back to exactly the same string.
    """
    text = json.dumps(message.to_dict(), ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message.to_dict(), ensure_ascii=True, separators=(",", ":"))
    return text


# ----------------------------------------------------------------------------------------------------
# Reading frames (both sides decode a frame here; the server's validation of requests, and its quoting of what a
# client sent, is in voicecli_endpoint/validation.py)


MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this are refused before parsing. Why a fixed bound: json.loads refuses deep
nesting only when the interpreter's stack runs out, and how much is left depends on the caller (1,497 levels at the
top of a thread, fewer inside the server's tasks), so the same frame was read by one caller and refused by another
(the fuzz test's oracle and the server disagreed). A protocol message is one flat object."""


def _nests_deeper_than(text: str, limit: int) -> bool:
    """Whether arrays/objects in `text` nest deeper than `limit` (brackets inside strings do not count). Only a text
    with more brackets than `limit` is scanned, so ordinary messages cost two str.count calls."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def decode_object(data: str | bytes, limits: Limits) -> dict[str, Any]:
    """Bytes or text of one frame -> a JSON object, checking size, encoding and shape."""
    size = len(data) if isinstance(data, bytes | bytearray) else len(data.encode("utf-8", "surrogatepass"))
    if size > limits.max_frame_bytes:
        raise ProtocolError(
            ErrorCode.FRAME_TOO_LARGE, f"frame of {size} bytes exceeds the limit of {limits.max_frame_bytes}"
        )
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(ErrorCode.INVALID_UTF8, f"frame is not valid UTF-8 ({exc.reason})") from None
    else:
        text = data
    if _nests_deeper_than(text, MAX_JSON_DEPTH):
        raise ProtocolError(ErrorCode.MALFORMED_JSON,
                            f"frame nests arrays or objects deeper than {MAX_JSON_DEPTH} levels; a message is one flat "
                            "JSON object")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProtocolError(ErrorCode.MALFORMED_JSON, f"frame is not JSON: {exc}") from None
    except ValueError:  # Python refuses integers of more than sys.get_int_max_str_digits() digits (4300)
        raise ProtocolError(
            ErrorCode.MALFORMED_JSON, "frame holds a number too long to read (an integer of over 4300 digits)"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(
            ErrorCode.NOT_AN_OBJECT, f"a message must be a JSON object, got {type(value).__name__}"
        )
    return value


@dataclass(frozen=True)
class InvocationRequest:
    """The body of POST /invocations."""

    text: str
    voice: str = DEFAULTS.voice
    speed: float = DEFAULTS.speed
    format: HttpAudioFormat = DEFAULTS.http_format
    stream: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "voice": self.voice,
            "speed": self.speed,
            "format": self.format,
            "stream": self.stream,
        }


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a bind address, or the host of a URL) names this machine only: localhost, 127.0.0.0/8, ::1.

    A server bound to anything else is reachable from the network; without a token it should say so loudly.
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


CONTENT_TYPES: Final[dict[HttpAudioFormat, str]] = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "pcm16": f"audio/pcm;rate={SAMPLE_RATE};channels=1;format=s16le",
}
"""Content-Type of a POST /invocations response per format."""


def _timings(value: Any) -> Timings:
    if not isinstance(value, dict):
        raise ProtocolError(ErrorCode.BAD_FIELD, "timings must be an object")
    try:
        first = value.get("first_audio_ms")
        return Timings(
            queue_wait_ms=float(value["queue_wait_ms"]),
            synthesis_ms=float(value["synthesis_ms"]),
            encoding_ms=float(value["encoding_ms"]),
            audio_s=float(value["audio_s"]),
            first_audio_ms=None if first is None else float(first),
            chunks=int(value.get("chunks", 0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"bad timings: {exc!r}") from None


def _word_timing(value: Any) -> WordTiming:
    if not isinstance(value, dict):
        raise TypeError("a word must be an object")
    start, end = float(value["start_ms"]), float(value["end_ms"])
    if not 0.0 <= start <= end:
        raise ValueError(f"word times must satisfy 0 <= start_ms <= end_ms, got {start} and {end}")
    return WordTiming(w=str(value["w"]), start_ms=start, end_ms=end)


def parse_server_message(data: str | bytes) -> ServerMessage:
    """Read one server control frame (client side). Unknown extra fields are ignored. Raises ProtocolError."""
    obj = decode_object(data, Limits(max_frame_bytes=1 << 30))
    kind = obj.get("type")
    try:
        if kind == SynthesisStart.TYPE:
            return SynthesisStart(
                request_id=obj["request_id"], format=obj["format"], sample_rate=int(obj["sample_rate"])
            )
        if kind == SynthesisComplete.TYPE:
            return SynthesisComplete(
                request_id=obj["request_id"],
                timings=_timings(obj["timings"]),
                elapsed_s=float(obj["elapsed_s"]),
            )
        if kind == Error.TYPE:
            return Error(code=str(obj["code"]), message=str(obj["message"]), request_id=obj.get("request_id"))
        if kind == CancelAck.TYPE:
            return CancelAck(request_id=obj.get("request_id"), dropped=tuple(obj["dropped"]))
        if kind == Words.TYPE:
            return Words(request_id=obj["request_id"], words=tuple(_word_timing(word) for word in obj["words"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(ErrorCode.BAD_FIELD, f"bad {kind} message: {exc!r}") from None
    raise ProtocolError(ErrorCode.UNKNOWN_TYPE, f"unknown server message type {kind!r}")


# ----------------------------------------------------------------------------------------------------
# Binary frames


def encode_pcm_frame(samples: bytes) -> bytes:
    """Wrap PCM16 little-endian mono samples in the protocol's framing."""
    if len(samples) % 2:
        raise ValueError("PCM16 payload must be a whole number of 2-byte samples")
    return _PCM_HEADER.pack(PCM_MAGIC, len(samples)) + samples


def decode_pcm_frame(frame: bytes) -> bytes:
    """The samples of one PCM16 frame. Raises ProtocolError when the framing is wrong."""
    if len(frame) < PCM_HEADER_BYTES or not frame.startswith(PCM_MAGIC):
        raise ProtocolError(ErrorCode.UNKNOWN_FRAME, "not a PCM16 frame")
    _, length = _PCM_HEADER.unpack_from(frame)
    if len(frame) - PCM_HEADER_BYTES != length:
        raise ProtocolError(
            ErrorCode.UNKNOWN_FRAME,
            f"PCM16 frame announces {length} bytes, carries {len(frame) - PCM_HEADER_BYTES}",
        )
    return bytes(frame[PCM_HEADER_BYTES:])


@dataclass(frozen=True)
class Control:
    """A JSON control frame."""

    message: ServerMessage


@dataclass(frozen=True)
class Mp3Audio:
    """A binary frame holding whole MP3 frames."""

    data: bytes


@dataclass(frozen=True)
class PcmAudio:
    """A binary frame holding PCM16 little-endian mono samples (framing removed)."""

    samples: bytes

    @property
    def num_samples(self) -> int:
        return len(self.samples) // 2


Frame = Control | Mp3Audio | PcmAudio


def classify_frame(data: str | bytes) -> Frame:
    """Tell a server frame's kind from its bytes alone (for transports that lose the WebSocket frame type)."""
    if isinstance(data, str):
        return Control(parse_server_message(data))
    if data[:1] == b"{":
        return Control(parse_server_message(data))
    if data[:1] == b"\xff":
        return Mp3Audio(bytes(data))
    if data.startswith(PCM_MAGIC):
        return PcmAudio(decode_pcm_frame(data))
    raise ProtocolError(
        ErrorCode.UNKNOWN_FRAME, f"frame starts with {bytes(data[:4])!r}: not JSON, MP3 or PCM16"
    )
