"""The stand-ins' event-stream encoder must produce frames botocore's own decoder accepts, byte for byte."""

from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from tests.standins.eventstream import encode_message, event, exception


def decode_all(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return [(dict(message.headers), message.payload) for message in buffer]


def test_round_trips_headers_and_payload() -> None:
    headers = {":message-type": "event", ":event-type": "contentBlockDelta", "x-ünïcode": "välue"}
    payload = json.dumps({"delta": {"text": "hi"}}).encode()
    assert decode_all(encode_message(headers, payload)) == [(headers, payload)]


def test_consecutive_messages_split_anywhere_decode_in_order() -> None:
    stream = event("messageStart", {"role": "assistant"}) + exception("throttlingException", "slow down")
    buffer = EventStreamBuffer()
    decoded = []
    for i in range(0, len(stream), 7):  # arbitrary chunk boundaries, as on the wire
        buffer.add_data(stream[i : i + 7])
        decoded.extend(buffer)
    assert [m.headers[":event-type" if i == 0 else ":exception-type"] for i, m in enumerate(decoded)] == [
        "messageStart",
        "throttlingException",
    ]
    assert decoded[1].headers[":message-type"] == "exception"
    assert json.loads(decoded[1].payload) == {"message": "slow down"}


def test_empty_headers_and_payload() -> None:
    assert decode_all(encode_message({}, b"")) == [({}, b"")]


def test_corrupted_frame_fails_the_checksum() -> None:
    frame = bytearray(event("messageStop", {"stopReason": "end_turn"}))
    frame[-6] ^= 0xFF
    with pytest.raises(ChecksumMismatch):
        decode_all(bytes(frame))
