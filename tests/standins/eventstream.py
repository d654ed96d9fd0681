"""Encoder for AWS event-stream messages (application/vnd.amazon.eventstream).

botocore ships only a decoder; the stand-ins need to produce the frames Bedrock sends.
Frame: u32 total_len | u32 headers_len | u32 crc32(prelude) | headers | payload | u32 crc32(everything before).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_STRING = 7


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string-typed headers."""
    encoded = b""
    for name, value in headers.items():
        name_b, value_b = name.encode(), value.encode()
        encoded += struct.pack(">B", len(name_b)) + name_b + struct.pack(">BH", _STRING, len(value_b)) + value_b
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(event_type: str, body: dict[str, Any]) -> bytes:
    """A normal event such as contentBlockDelta."""
    headers = {":message-type": "event", ":event-type": event_type, ":content-type": "application/json"}
    return encode_message(headers, json.dumps(body).encode())


def exception(exception_type: str, message: str) -> bytes:
    """A mid-stream exception such as throttlingException; boto3 raises EventStreamError for it."""
    headers = {
        ":message-type": "exception",
        ":exception-type": exception_type,
        ":content-type": "application/json",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())
