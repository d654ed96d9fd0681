"""A tiny protocol client for the endpoint tests, written against voicecli.wire.protocol."""

from __future__ import annotations

import asyncio
import json
import select
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import miniaudio
from websockets.asyncio.client import ClientConnection

from voicecli.audio.mp3_frames import frame_length
from voicecli.wire.protocol import (
    SAMPLE_RATE,
    CancelAck,
    Control,
    Error,
    Frame,
    Mp3Audio,
    PcmAudio,
    RequestId,
    SynthesisComplete,
    SynthesisStart,
    classify_frame,
)

RECV_TIMEOUT_S = 120.0
"""Generous: a loaded CI machine can take seconds per sentence. Never a performance assertion."""


async def recv_frame(ws: ClientConnection, timeout: float = RECV_TIMEOUT_S) -> Frame:
    data = await asyncio.wait_for(ws.recv(), timeout)
    return classify_frame(data)


async def send_json(ws: ClientConnection, obj: Any, *, binary: bool = False) -> None:
    text = json.dumps(obj)
    await ws.send(text.encode() if binary else text)


@dataclass
class Answer:
    """Everything received about one request."""

    request_id: RequestId
    start: SynthesisStart | None = None
    audio: list[bytes] = field(default_factory=list)
    complete: SynthesisComplete | None = None
    error: Error | None = None


@dataclass
class Received:
    answers: list[Answer]
    """One per synthesis request that started, in the order they started."""
    others: list[Error | CancelAck]
    """Control frames about something else: rejected messages, cancel acknowledgements."""


async def read_answers(ws: ClientConnection, count: int, *, started: SynthesisStart | None = None) -> Received:
    """Read until `count` requests reached their terminal frame (synthesis_complete or their own error).

    Asserts the protocol's ordering: audio only between a start and its terminal frame, never interleaved.
    `started`: the start frame of a request already in progress (read by the caller).
    """
    received = Received([], [])
    current: Answer | None = None
    if started is not None:
        current = Answer(started.request_id, start=started)
        received.answers.append(current)
    finished = 0
    while finished < count:
        frame = await recv_frame(ws)
        if isinstance(frame, Mp3Audio | PcmAudio):
            assert current is not None, "audio frame outside any request"
            current.audio.append(frame.data if isinstance(frame, Mp3Audio) else frame.samples)
            continue
        message = frame.message
        if isinstance(message, SynthesisStart):
            assert current is None, f"request {message.request_id!r} started inside {current.request_id!r}"
            current = Answer(message.request_id, start=message)
            received.answers.append(current)
        elif isinstance(message, SynthesisComplete):
            assert current is not None and current.request_id == message.request_id
            current.complete = message
            current = None
            finished += 1
        elif isinstance(message, Error) and current is not None and message.request_id == current.request_id:
            current.error = message
            current = None
            finished += 1
        else:
            received.others.append(message)
    return received


async def next_control(ws: ClientConnection) -> Error | CancelAck | SynthesisStart | SynthesisComplete:
    """The next control frame, skipping audio."""
    while True:
        frame = await recv_frame(ws)
        if isinstance(frame, Control):
            return frame.message


def assert_whole_mp3_frames(data: bytes) -> int:
    """Walk `data` frame by frame; it must start with 0xFF and end exactly on a frame boundary. Frame count."""
    assert data[:1] == b"\xff"
    offset = frames = 0
    while offset < len(data):
        offset += frame_length(data[offset : offset + 4])
        frames += 1
    assert offset == len(data), "binary frame ends inside an MP3 frame"
    return frames


def mp3_duration_s(parts: Sequence[bytes]) -> float:
    decoded = miniaudio.decode(b"".join(parts), output_format=miniaudio.SampleFormat.SIGNED16, nchannels=1,
                               sample_rate=SAMPLE_RATE)
    return float(decoded.num_frames) / SAMPLE_RATE


def send_chunked_until_answered(port: int, total_bytes: int, chunk_bytes: int = 65_536) -> tuple[int, bytes]:
    """POST /invocations with a chunked body of `total_bytes` (no Content-Length), sent over a raw socket, stopping
    as soon as the server answers. Returns (bytes of body sent, the answer's first bytes)."""
    chunk = f"{chunk_bytes:x}\r\n".encode() + b" " * chunk_bytes + b"\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        while sent < total_bytes:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(chunk)
            except OSError:  # the server answered and closed
                break
            sent += chunk_bytes
        else:
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer or b"}" not in answer.split(b"\r\n\r\n", 1)[1]:  # a JSON error body
            data = sock.recv(4096)
            if not data:
                break
            answer += data
        return sent, answer
