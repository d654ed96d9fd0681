"""The WebSocket protocol against the real server process, over loopback, with the `websockets` client.

The tests that use the real server are in the slow tier (their `server` fixture puts them there, see
tests/conftest.py); the second half of this file gives the fast tier the same session behaviours against the real
endpoint app served in this process with the instant tone engine (tests/fakes/endpoint.py), whose gate lets a test
cancel or overfill a session while a synthesis is provably in progress.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import RunningServer
from tests.endpoint.helpers import (
    assert_whole_mp3_frames,
    mp3_duration_s,
    next_control,
    read_answers,
    recv_frame,
    send_json,
)
from tests.fakes.endpoint import InProcessEndpoint
from tests.fakes.engine import PARTS
from voicecli.wire.protocol import (
    DEFAULTS,
    PCM_MAGIC,
    CancelAck,
    Control,
    Error,
    ErrorCode,
    Frame,
    Limits,
    Mp3Audio,
    SynthesisComplete,
    SynthesisStart,
)

SHORT = "Hi."
FAST = 2.0
"""Speed for the many throw-away requests: half the audio, about half the synthesis time."""


async def test_aws_sample_shape_as_text_frame(server: RunningServer) -> None:
    """The AWS sample's exact message: no type, text/voice/speed/request_id/request_timestamp."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "voice": "af_heart", "speed": 1.0, "request_id": "aws-1",
                             "request_timestamp": 1764400000.123})
        received = await read_answers(ws, 1)
    [answer] = received.answers
    assert answer.start == SynthesisStart("aws-1", "mp3", 24_000)
    assert answer.complete is not None and answer.complete.request_id == "aws-1"
    assert answer.audio, "no audio frames"
    for part in answer.audio:
        assert_whole_mp3_frames(part)
    timings = answer.complete.timings
    assert timings.audio_s > 0 and timings.chunks == 1 and timings.first_audio_ms is not None
    assert answer.complete.total_duration_s == timings.audio_s
    # lame adds under 0.1 s of encoder delay and padding
    assert abs(mp3_duration_s(answer.audio) - timings.audio_s) < 0.15


async def test_binary_frames_are_decoded_as_utf8(server: RunningServer) -> None:
    """SageMaker forwards client messages as BINARY frames."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": 7, "format": "pcm16"}, binary=True)
        received = await read_answers(ws, 1)
    [answer] = received.answers
    assert answer.start is not None and answer.start.format == "pcm16" and answer.start.request_id == 7
    assert answer.complete is not None
    samples = sum(len(part) for part in answer.audio) // 2
    assert samples / 24_000 == pytest.approx(answer.complete.timings.audio_s, abs=0.0005)  # audio_s is to the ms


async def test_pcm_frames_carry_the_framing_header(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "p", "format": "pcm16"})
        raw: list[bytes] = []
        while True:
            data = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(data, bytes):
                raw.append(data)
            elif json.loads(data)["type"] == "synthesis_complete":
                break
    assert raw and all(part.startswith(PCM_MAGIC) for part in raw)


async def test_request_id_is_assigned_when_missing(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST})
        received = await read_answers(ws, 1)
    [answer] = received.answers
    assert isinstance(answer.request_id, str) and answer.request_id
    assert answer.complete is not None and answer.complete.request_id == answer.request_id


async def test_thirty_messages_on_one_connection(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        for index in range(30):
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": f"m{index}"})
            received = await read_answers(ws, 1)
            [answer] = received.answers
            assert answer.request_id == f"m{index}" and answer.complete is not None and answer.audio


async def test_pipelined_requests_are_answered_in_order_without_interleaving(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        for name in ("one", "two", "three"):
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": name})
        received = await read_answers(ws, 3)  # asserts no interleaving
    assert [answer.request_id for answer in received.answers] == ["one", "two", "three"]
    assert all(answer.complete is not None and answer.audio for answer in received.answers)
    waits = [answer.complete.timings.queue_wait_ms for answer in received.answers if answer.complete]
    assert waits[2] > waits[0]  # the third waited for the two before it: the queue wait is measured


async def test_cancel_drops_queued_and_current_and_session_stays_usable(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": "One sentence here. Another one here. And a third one.", "request_id": "long"})
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "queued"})
        start = await next_control(ws)
        assert isinstance(start, SynthesisStart) and start.request_id == "long"
        await send_json(ws, {"type": "cancel"})
        # Audio of "long" may still arrive before the ack, never after it.
        while True:
            frame = await recv_frame(ws)
            if isinstance(frame, Control):
                ack = frame.message
                break
        assert isinstance(ack, CancelAck) and ack.request_id is None
        assert set(ack.dropped) == {"long", "queued"}
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 1)
    assert [answer.request_id for answer in received.answers] == ["after"]  # nothing of the dropped ones
    assert received.answers[0].complete is not None


LONG_FIRST = "The capital of the United Arab Emirates is Abu Dhabi, a large city."
"""Its first piece ("...is Abu Dhabi,", ~3 s) is long enough to be decoded in parts (decoder_parts.py)."""


async def test_a_turns_first_piece_comes_in_parts_and_a_queued_request_whole(server: RunningServer) -> None:
    """The request that starts a turn (the session was idle) has its first piece sent in parts, as soon as each is
    decoded; a request that arrives behind it is not a turn's start, and each of its pieces comes whole. The two
    carry the same text, so the same length of audio (the parts add up to the piece)."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "turn"})
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "behind"})
        received = await read_answers(ws, 2)
    turn, behind = received.answers
    assert turn.complete is not None and behind.complete is not None
    assert behind.complete.timings.chunks == 2  # "...is Abu Dhabi," and "a large city.", each whole
    assert turn.complete.timings.chunks >= 3
    assert abs(turn.complete.timings.audio_s - behind.complete.timings.audio_s) < 0.1


async def test_after_a_cancel_of_everything_the_next_request_starts_a_turn(server: RunningServer) -> None:
    """A request that comes while the listener is still playing the last answer continues it (its pieces whole);
    a cancel of everything means the listener stopped (a barge-in, or a speculative answer dropped unheard), so the
    next request starts a turn again: first in line, its first piece in parts."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "heard"})
        await read_answers(ws, 1)  # ~3.5 s of audio, "playing" at real time from its first byte
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "continued"})
        [continued] = (await read_answers(ws, 1)).answers
        await send_json(ws, {"type": "cancel"})
        assert await next_control(ws) == CancelAck(None, ())
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "new-turn"})
        [new_turn] = (await read_answers(ws, 1)).answers
    assert continued.complete is not None and continued.complete.timings.chunks == 2
    assert new_turn.complete is not None and new_turn.complete.timings.chunks >= 3


async def test_cancel_between_the_parts_of_a_first_piece(server: RunningServer) -> None:
    """A cancel that comes after the first part's audio drops the parts not yet decoded: nothing of the request
    follows the acknowledgement, and the session goes on."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": LONG_FIRST, "request_id": "long"})
        while not isinstance(await recv_frame(ws), Mp3Audio):
            pass
        await send_json(ws, {"type": "cancel"})
        while not isinstance(frame := await recv_frame(ws), Control):
            pass
        assert frame.message == CancelAck(None, ("long",))
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 1)
    assert [answer.request_id for answer in received.answers] == ["after"] and received.answers[0].complete


async def test_cancel_one_queued_request_by_id(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "keep"})
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "drop"})
        await send_json(ws, {"type": "cancel", "request_id": "drop"})
        received = await read_answers(ws, 1)
        await send_json(ws, {"type": "cancel", "request_id": "unknown"})
        ack_unknown = await next_control(ws)
    assert [answer.request_id for answer in received.answers] == ["keep"]
    assert CancelAck("drop", ("drop",)) in received.others
    assert ack_unknown == CancelAck("unknown", ())


async def test_close_finishes_received_requests_then_closes(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "last"})
        await send_json(ws, {"type": "close"})
        received = await read_answers(ws, 1)
        with pytest.raises(websockets.ConnectionClosedOK):
            await asyncio.wait_for(ws.recv(), 30)
        assert ws.close_code == 1000
    assert received.answers[0].complete is not None and received.answers[0].audio


def _oversized() -> str:
    return json.dumps({"text": SHORT, "padding": "x" * (DEFAULTS.limits.max_frame_bytes + 10)})


BAD_MESSAGES: list[tuple[str, Any, ErrorCode]] = [
    ("malformed_json", '{"text": "Hi."', ErrorCode.MALFORMED_JSON),
    ("invalid_utf8", b'{"text": "\xff\xfe"}', ErrorCode.INVALID_UTF8),
    ("not_an_object", "[1, 2]", ErrorCode.NOT_AN_OBJECT),
    ("empty_text", json.dumps({"text": "", "request_id": "e"}), ErrorCode.EMPTY_TEXT),
    ("whitespace_text", json.dumps({"text": " \n\t ", "request_id": "w"}), ErrorCode.EMPTY_TEXT),
    ("text_too_long", json.dumps({"text": "a" * (DEFAULTS.limits.max_text_chars + 1)}), ErrorCode.TEXT_TOO_LONG),
    ("unknown_voice", json.dumps({"text": SHORT, "voice": "xx_nobody", "request_id": "v"}),
     ErrorCode.UNKNOWN_VOICE),
    ("speed_too_high", json.dumps({"text": SHORT, "speed": 2.5}), ErrorCode.BAD_SPEED),
    ("speed_not_a_number", json.dumps({"text": SHORT, "speed": "fast"}), ErrorCode.BAD_SPEED),
    ("unknown_format", json.dumps({"text": SHORT, "format": "ogg"}), ErrorCode.UNKNOWN_FORMAT),
    ("unknown_type", json.dumps({"type": "dance"}), ErrorCode.UNKNOWN_TYPE),
    ("oversized_frame", _oversized(), ErrorCode.FRAME_TOO_LARGE),
]


@pytest.mark.parametrize(("message", "expected"), [(m, c) for _, m, c in BAD_MESSAGES],
                         ids=[name for name, _, _ in BAD_MESSAGES])
async def test_bad_message_gets_an_error_and_the_session_goes_on(
    server: RunningServer, message: str | bytes, expected: ErrorCode
) -> None:
    async with connect(server.ws_url, max_size=None) as ws:
        await ws.send(message)
        error = await next_control(ws)
        assert isinstance(error, Error) and error.code == expected, error
        if expected == ErrorCode.UNKNOWN_VOICE:
            assert "af_heart" in error.message and "am_michael" in error.message
            assert error.request_id == "v"
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "ok"})
        received = await read_answers(ws, 1)
    assert received.answers[0].request_id == "ok" and received.answers[0].complete is not None


async def _stats(server: RunningServer) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        response = await client.get(f"{server.http_url}/stats")
    stats: dict[str, Any] = response.json()
    return stats


async def test_disconnect_mid_synthesis_frees_the_queue(server: RunningServer) -> None:
    sentences = " ".join(f"Sentence number {n}." for n in range(1, 13))
    before = await _stats(server)
    async with connect(server.ws_url) as first:
        await send_json(first, {"text": sentences, "request_id": "abandoned"})
        await send_json(first, {"text": SHORT, "request_id": "never"})
        while not isinstance(await recv_frame(first), Mp3Audio):
            pass  # leave once the first sentence's audio arrived
    async with connect(server.ws_url) as second:
        await send_json(second, {"text": SHORT, "speed": FAST, "request_id": "served"})
        received = await read_answers(second, 1)
        assert received.answers[0].complete is not None
        during = await _stats(server)
        assert during["active_sessions"] == 1  # the abandoned session is gone
        assert during["scheduler"]["queued"] == 0
        await send_json(second, {"text": SHORT, "speed": FAST, "request_id": "again"})
        again = await read_answers(second, 1)
        assert again.answers[0].complete is not None
        after = await _stats(server)
    # Between the two stats only "again" was synthesized: nothing of the abandoned session kept running.
    assert after["pieces_synthesized"] - during["pieces_synthesized"] == again.answers[0].complete.timings.chunks
    # And far fewer than the abandoned request's 12 pieces ever ran.
    assert during["pieces_synthesized"] - before["pieces_synthesized"] < 12


async def test_two_sessions_are_served_fairly(server: RunningServer) -> None:
    many = " ".join(f"Part {n}." for n in range(1, 7))
    async with connect(server.ws_url) as long_session, connect(server.ws_url) as short_session:
        await send_json(long_session, {"text": many, "request_id": "long"})
        start = await next_control(long_session)
        assert isinstance(start, SynthesisStart)
        await send_json(short_session, {"text": SHORT, "speed": FAST, "request_id": "short"})
        short_done = asyncio.create_task(read_answers(short_session, 1))
        long_done = asyncio.create_task(read_answers(long_session, 1, started=start))
        done, _ = await asyncio.wait({short_done, long_done}, return_when=asyncio.FIRST_COMPLETED)
        # Round-robin: the one-sentence request finishes while the six-sentence one is still going.
        assert short_done in done and long_done not in done
        long_answers = await long_done
    complete = long_answers.answers[0].complete
    assert isinstance(complete, SynthesisComplete) and complete.timings.chunks == 6


# ---------------------------------------------------------------------------------------------------- hardening
# (issue 17: messages an outside probe sent that cost a whole session, or that were answered badly)

HUGE_INTEGER = "9" * 5000
"""Past Python's 4300-digit int conversion limit: json.loads raises a plain ValueError for it."""


@pytest.mark.parametrize("field", ["speed", "request_id", "request_timestamp"])
async def test_a_huge_integer_costs_one_error_frame_not_the_session_and_its_queue(
    server: RunningServer, field: str
) -> None:
    """Before the fix the connection dropped without a close frame and the queued requests were lost."""
    async with connect(server.ws_url) as ws:
        for name in ("before-1", "before-2"):
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": name})
        await ws.send('{"text": "Hi.", "' + field + '": ' + HUGE_INTEGER + "}")
        await ws.send('{"text": "Hi.", "speed": ' + "9" * 400 + ', "request_id": "past-float-range"}')
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 3)
    assert [a.request_id for a in received.answers] == ["before-1", "before-2", "after"]
    assert all(a.complete is not None for a in received.answers)
    codes = [(m.code, m.request_id) for m in received.others if isinstance(m, Error)]
    assert codes == [(ErrorCode.MALFORMED_JSON, None), (ErrorCode.BAD_SPEED, "past-float-range")]


async def test_a_lone_surrogate_in_text_gets_invalid_utf8(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        await ws.send('{"text": "Hi \\ud800 there.", "request_id": "sur"}')
        error = await next_control(ws)
        assert isinstance(error, Error) and (error.code, error.request_id) == (ErrorCode.INVALID_UTF8, "sur")
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "ok"})
        assert (await read_answers(ws, 1)).answers[0].complete is not None


@pytest.mark.parametrize("audio_format", ["mp3", "pcm16"])
async def test_text_with_nothing_speakable_gets_an_empty_well_formed_answer(server: RunningServer,
                                                                            audio_format: str) -> None:
    """Before the fix mp3 answered synthesis_failed ("Not currently encoding"): lame flushed with no audio."""
    async with connect(server.ws_url) as ws:
        await send_json(ws, {"text": "?!... (((", "request_id": "quiet", "format": audio_format})
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "loud", "format": audio_format})
        received = await read_answers(ws, 2)
    quiet, loud = received.answers
    assert quiet.error is None and quiet.complete is not None, quiet
    assert quiet.audio == [] and quiet.complete.timings.audio_s == 0 and quiet.complete.timings.chunks == 0
    assert loud.complete is not None and loud.audio


async def test_client_strings_are_not_echoed_or_logged_in_full(server: RunningServer) -> None:
    marker = "Q7zX" * 15_000  # 60 KB
    async with connect(server.ws_url, max_size=None) as ws:
        await send_json(ws, {"type": marker})
        error = await next_control(ws)
        assert isinstance(error, Error) and error.code == ErrorCode.UNKNOWN_TYPE
        assert len(error.message) < 300
        await send_json(ws, {"text": "Zyx... !!! ...", "request_id": "private"})  # nothing speakable
        assert (await read_answers(ws, 1)).answers[0].complete is not None
    log = server.log_path.read_text(errors="replace")
    assert marker[:200] not in log
    assert "Zyx" not in log  # the user's text is logged at DEBUG only; the server runs at INFO


# ------------------------------------------------------------------------------------------------- fast tier
# The session's behaviours above, against the real endpoint app in this process with the tone engine
# (tests/fakes/endpoint.py). Its engine gives a turn's first piece in PARTS parts, so `timings.chunks` counts them;
# its gate (`engine.held()`) holds syntheses, so cancels and limits are tested while work is provably in flight.
# Tests that read /stats or need other limits start an endpoint of their own (a fraction of a second).


async def frames_until(ws: ClientConnection, wanted: Callable[[Control], bool]) -> list[Frame]:
    """Frames up to and including the first control frame `wanted` accepts."""
    frames: list[Frame] = []
    while True:
        frame = await recv_frame(ws, timeout=30)
        frames.append(frame)
        if isinstance(frame, Control) and wanted(frame):
            return frames


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        await asyncio.sleep(0.005)


def start_in(frames: list[Frame]) -> SynthesisStart | None:
    """The synthesis_start among `frames`, if one came (to hand to read_answers as `started`)."""
    starts = [f.message for f in frames if isinstance(f, Control) and isinstance(f.message, SynthesisStart)]
    return starts[-1] if starts else None


async def steps_started(endpoint: InProcessEndpoint, total: int) -> None:
    """Wait (off the event loop) until the engine has started `total` steps since the endpoint started (take the
    count before sending what will start them: `len(endpoint.engine.calls)`)."""
    assert await asyncio.to_thread(endpoint.engine.wait_for_calls, total), "the engine never started that step"


async def test_fake_aws_sample_shape_as_text_frame(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "voice": "af_heart", "speed": 1.0, "request_id": "aws-1",
                             "request_timestamp": 1764400000.123})
        received = await read_answers(ws, 1)
    [answer] = received.answers
    assert answer.start == SynthesisStart("aws-1", "mp3", 24_000)
    assert answer.complete is not None and answer.complete.request_id == "aws-1" and answer.audio
    for part in answer.audio:
        assert_whole_mp3_frames(part)
    timings = answer.complete.timings
    assert timings.audio_s > 0 and timings.chunks == PARTS and timings.first_audio_ms is not None
    assert answer.complete.total_duration_s == timings.audio_s
    assert abs(mp3_duration_s(answer.audio) - timings.audio_s) < 0.15  # lame's delay and padding


async def test_fake_binary_frames_are_decoded_as_utf8(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": 7, "format": "pcm16"}, binary=True)
        received = await read_answers(ws, 1)
    [answer] = received.answers
    assert answer.start is not None and answer.start.format == "pcm16" and answer.start.request_id == 7
    assert answer.complete is not None
    samples = sum(len(part) for part in answer.audio) // 2
    assert samples / 24_000 == pytest.approx(answer.complete.timings.audio_s, abs=0.0005)


async def test_fake_pcm_frames_carry_the_framing_header(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "p", "format": "pcm16"})
        raw: list[bytes] = []
        while True:
            data = await asyncio.wait_for(ws.recv(), 30)
            if isinstance(data, bytes):
                raw.append(data)
            elif json.loads(data)["type"] == "synthesis_complete":
                break
    assert raw and all(part.startswith(PCM_MAGIC) for part in raw)


async def test_fake_request_id_is_assigned_when_missing(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": SHORT, "speed": FAST})
        await send_json(ws, {"text": SHORT, "speed": FAST})
        received = await read_answers(ws, 2)
    ids = [answer.request_id for answer in received.answers]
    assert all(isinstance(i, str) and i for i in ids) and ids[0] != ids[1]
    assert all(a.complete is not None and a.complete.request_id == a.request_id for a in received.answers)


async def test_fake_thirty_messages_on_one_connection(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        for index in range(30):
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": f"m{index}"})
            [answer] = (await read_answers(ws, 1)).answers
            assert answer.request_id == f"m{index}" and answer.complete is not None and answer.audio


async def test_fake_pipelined_requests_are_answered_in_order_without_interleaving(
    fake_endpoint: InProcessEndpoint,
) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        steps = len(fake_endpoint.engine.calls)
        with fake_endpoint.engine.held():  # the first one is being synthesized while the others arrive
            for name in ("one", "two", "three"):
                await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": name})
            await steps_started(fake_endpoint, steps + 1)
        received = await read_answers(ws, 3)  # asserts no interleaving
    assert [answer.request_id for answer in received.answers] == ["one", "two", "three"]
    assert all(answer.complete is not None and answer.audio for answer in received.answers)
    waits = [answer.complete.timings.queue_wait_ms for answer in received.answers if answer.complete]
    assert waits[2] > waits[0]  # the third waited for the two before it: the queue wait is measured


async def test_fake_cancel_drops_queued_and_current_and_session_stays_usable(
    fake_endpoint: InProcessEndpoint,
) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        steps = len(fake_endpoint.engine.calls)
        with fake_endpoint.engine.held():
            await send_json(ws, {"text": "One sentence here. Another one here. And a third one.", "request_id": "long"})
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "queued"})
            start = await next_control(ws)
            assert isinstance(start, SynthesisStart) and start.request_id == "long"
            await steps_started(fake_endpoint, steps + 1)  # "long" is being synthesized, "queued" waits behind it
            await send_json(ws, {"type": "cancel"})
            frames = await frames_until(ws, lambda frame: True)
        assert frames == [Control(CancelAck(None, ("long", "queued")))]  # not a byte of "long" came
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 1)
    assert [answer.request_id for answer in received.answers] == ["after"]  # nothing of the dropped ones
    assert received.answers[0].complete is not None and not received.others


async def test_fake_a_turns_first_piece_comes_in_parts_and_a_queued_request_whole(
    fake_endpoint: InProcessEndpoint,
) -> None:
    """As the real test above: a request that starts a turn has its first piece in parts; one behind it does not."""
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "turn"})
        await send_json(ws, {"text": LONG_FIRST, "format": "pcm16", "request_id": "behind"})
        turn, behind = (await read_answers(ws, 2)).answers
    assert turn.complete is not None and behind.complete is not None
    assert behind.complete.timings.chunks == 2  # "...is abu dhabi," and "a large city.", each whole
    assert turn.complete.timings.chunks == PARTS + 1
    assert abs(turn.complete.timings.audio_s - behind.complete.timings.audio_s) < 0.01


async def test_fake_after_a_cancel_of_everything_the_next_request_starts_a_turn(
    fake_endpoint: InProcessEndpoint,
) -> None:
    slow = {"text": LONG_FIRST, "format": "pcm16", "speed": 0.5}  # ~1.4 s of tone, "playing" from its first byte
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {**slow, "request_id": "heard"})
        await read_answers(ws, 1)
        await send_json(ws, {**slow, "request_id": "continued"})
        [continued] = (await read_answers(ws, 1)).answers
        await send_json(ws, {"type": "cancel"})
        assert await next_control(ws) == CancelAck(None, ())
        await send_json(ws, {**slow, "request_id": "new-turn"})
        [new_turn] = (await read_answers(ws, 1)).answers
    assert continued.complete is not None and continued.complete.timings.chunks == 2
    assert new_turn.complete is not None and new_turn.complete.timings.chunks == PARTS + 1


async def test_fake_cancel_between_the_parts_of_a_first_piece(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        with fake_endpoint.engine.held(allow=1):  # the first part goes out, the second is being synthesized
            await send_json(ws, {"text": LONG_FIRST, "request_id": "long"})
            while not isinstance(await recv_frame(ws, timeout=30), Mp3Audio):
                pass
            await send_json(ws, {"type": "cancel"})
            frames = await frames_until(ws, lambda frame: True)
        assert [f for f in frames if isinstance(f, Control)] == [Control(CancelAck(None, ("long",)))]
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 1)
    assert [answer.request_id for answer in received.answers] == ["after"] and received.answers[0].complete


async def test_fake_cancel_one_queued_request_by_id(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        steps = len(fake_endpoint.engine.calls)
        with fake_endpoint.engine.held():  # "keep" is being synthesized when the cancel of "drop" arrives
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "keep"})
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "drop"})
            await steps_started(fake_endpoint, steps + 1)
            await send_json(ws, {"type": "cancel", "request_id": "drop"})
            before = await frames_until(ws, lambda frame: isinstance(frame.message, CancelAck))
        assert before[-1] == Control(CancelAck("drop", ("drop",)))
        received = await read_answers(ws, 1, started=start_in(before))
        await send_json(ws, {"type": "cancel", "request_id": "unknown"})
        ack_unknown = await next_control(ws)
    assert [answer.request_id for answer in received.answers] == ["keep"] and received.answers[0].complete
    assert ack_unknown == CancelAck("unknown", ())


async def test_fake_close_finishes_received_requests_then_closes(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        steps = len(fake_endpoint.engine.calls)
        with fake_endpoint.engine.held():  # "late" arrives while "last" is being answered
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "last"})
            await steps_started(fake_endpoint, steps + 1)
            await send_json(ws, {"type": "close"})
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "late"})
            before = await frames_until(ws, lambda frame: isinstance(frame.message, Error))
        assert before[-1] == Control(Error(ErrorCode.SESSION_CLOSING, "the session is closing", "late"))
        received = await read_answers(ws, 1, started=start_in(before))
        with pytest.raises(websockets.ConnectionClosedOK):
            await asyncio.wait_for(ws.recv(), 30)
        assert ws.close_code == 1000
    assert [a.request_id for a in received.answers] == ["last"] and received.answers[0].complete is not None


async def test_fake_requests_past_the_queue_limit_get_queue_full_and_the_rest_is_served() -> None:
    with InProcessEndpoint(limits=Limits(max_queued_requests=2)) as endpoint:
        async with connect(endpoint.ws_url) as ws:
            steps = len(endpoint.engine.calls)
            with endpoint.engine.held():
                await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "r1"})
                start = await next_control(ws)  # r1 is being answered; two more may wait, the fourth may not
                await steps_started(endpoint, steps + 1)
                for name in ("r2", "r3", "r4"):
                    await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": name})
                refused = await next_control(ws)
            assert isinstance(refused, Error) and (refused.code, refused.request_id) == (ErrorCode.QUEUE_FULL, "r4")
            assert isinstance(start, SynthesisStart)
            received = await read_answers(ws, 3, started=start)
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "r5"})  # room again
            again = await read_answers(ws, 1)
    assert [a.request_id for a in received.answers] == ["r1", "r2", "r3"]
    assert all(a.complete is not None for a in received.answers) and not received.others
    assert again.answers[0].request_id == "r5" and again.answers[0].complete is not None


@pytest.mark.parametrize(("message", "expected"), [(m, c) for _, m, c in BAD_MESSAGES],
                         ids=[name for name, _, _ in BAD_MESSAGES])
async def test_fake_bad_message_gets_an_error_and_the_session_goes_on(
    fake_endpoint: InProcessEndpoint, message: str | bytes, expected: ErrorCode
) -> None:
    async with connect(fake_endpoint.ws_url, max_size=None) as ws:
        await ws.send(message)
        error = await next_control(ws)
        assert isinstance(error, Error) and error.code == expected, error
        if expected == ErrorCode.UNKNOWN_VOICE:
            assert "af_heart" in error.message and "am_michael" in error.message
            assert error.request_id == "v"
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "ok"})
        received = await read_answers(ws, 1)
    assert received.answers[0].request_id == "ok" and received.answers[0].complete is not None


async def test_fake_disconnect_mid_synthesis_frees_the_queue() -> None:
    sentences = " ".join(f"Sentence number {n}." for n in range(1, 13))
    with InProcessEndpoint() as endpoint:
        before = endpoint.stats()
        with endpoint.engine.held(allow=1):  # the client leaves while its first piece's second part is synthesized
            async with connect(endpoint.ws_url) as first:
                await send_json(first, {"text": sentences, "request_id": "abandoned"})
                await send_json(first, {"text": SHORT, "request_id": "never"})
                while not isinstance(await recv_frame(first, timeout=30), Mp3Audio):
                    pass
        async with connect(endpoint.ws_url) as second:
            await send_json(second, {"text": SHORT, "speed": FAST, "request_id": "served"})
            assert (await read_answers(second, 1)).answers[0].complete is not None
            during = await asyncio.to_thread(endpoint.stats)
            assert during["active_sessions"] == 1  # the abandoned session is gone
            assert during["scheduler"]["queued"] == 0
            await send_json(second, {"text": SHORT, "speed": FAST, "request_id": "again"})
            assert (await read_answers(second, 1)).answers[0].complete is not None
            after = await asyncio.to_thread(endpoint.stats)
    # Between the two stats only "again" (one piece) was synthesized: nothing of the abandoned session kept running.
    assert after["pieces_synthesized"] - during["pieces_synthesized"] == 1
    assert during["pieces_synthesized"] - before["pieces_synthesized"] < 12
    assert before["active_sessions"] == 0


async def test_fake_two_sessions_are_served_fairly() -> None:
    """As the real test above; with an instant engine both answers are in the client's buffers at once, so the
    order is read where it is decided: the engine's steps, on the one worker."""
    many = " ".join(f"Part {n}." for n in range(1, 7))
    with InProcessEndpoint(workers=1) as endpoint:  # one worker: every job competes for it
        async with connect(endpoint.ws_url) as long_session, connect(endpoint.ws_url) as short_session:
            steps = len(endpoint.engine.calls)
            with endpoint.engine.held():  # the short request arrives while the long one is under way
                await send_json(long_session, {"text": many, "request_id": "long"})
                start = await next_control(long_session)
                assert isinstance(start, SynthesisStart)
                await steps_started(endpoint, steps + 1)
                await send_json(short_session, {"text": SHORT, "speed": FAST, "request_id": "short"})
                short_start = await next_control(short_session)
                assert isinstance(short_start, SynthesisStart)
                await wait_until(lambda: endpoint.state.scheduler.queued >= 1)  # its G2P waits for the worker
            short_answers = await read_answers(short_session, 1, started=short_start)
            long_answers = await read_answers(long_session, 1, started=start)
        order = ["short" if speed == FAST else "long" for _, _, speed in endpoint.engine.calls[steps:]]
    # Served fairly: the one-sentence request was all synthesized while the six-sentence one was still going (in
    # the order submitted it would come after all of the long one's PARTS + 5 steps).
    assert order.count("short") == PARTS and order.count("long") == PARTS + 5 and order[-1] == "long", order
    assert short_answers.answers[0].complete is not None
    complete = long_answers.answers[0].complete
    assert isinstance(complete, SynthesisComplete) and complete.timings.chunks == 6 + PARTS - 1


async def test_fake_an_idle_session_is_closed_and_frees_its_slot() -> None:
    with InProcessEndpoint(limits=Limits(idle_timeout_s=0.3)) as endpoint:
        async with connect(endpoint.ws_url) as ws:
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "one"})
            await read_answers(ws, 1)
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 10)  # nothing more sent: closed after 0.3 s of idleness
            assert ws.close_code == 1000 and (ws.close_reason or "").startswith(ErrorCode.IDLE_TIMEOUT)
        assert (await asyncio.to_thread(endpoint.stats))["active_sessions"] == 0


@pytest.mark.parametrize("field", ["speed", "request_id", "request_timestamp"])
async def test_fake_a_huge_integer_costs_one_error_frame_not_the_session_and_its_queue(
    fake_endpoint: InProcessEndpoint, field: str
) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        for name in ("before-1", "before-2"):
            await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": name})
        await ws.send('{"text": "Hi.", "' + field + '": ' + HUGE_INTEGER + "}")
        await ws.send('{"text": "Hi.", "speed": ' + "9" * 400 + ', "request_id": "past-float-range"}')
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "after"})
        received = await read_answers(ws, 3)
    assert [a.request_id for a in received.answers] == ["before-1", "before-2", "after"]
    assert all(a.complete is not None for a in received.answers)
    codes = [(m.code, m.request_id) for m in received.others if isinstance(m, Error)]
    assert codes == [(ErrorCode.MALFORMED_JSON, None), (ErrorCode.BAD_SPEED, "past-float-range")]


async def test_fake_a_lone_surrogate_in_text_gets_invalid_utf8(fake_endpoint: InProcessEndpoint) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await ws.send('{"text": "Hi \\ud800 there.", "request_id": "sur"}')
        error = await next_control(ws)
        assert isinstance(error, Error) and (error.code, error.request_id) == (ErrorCode.INVALID_UTF8, "sur")
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "ok"})
        assert (await read_answers(ws, 1)).answers[0].complete is not None


@pytest.mark.parametrize("audio_format", ["mp3", "pcm16"])
async def test_fake_text_with_nothing_speakable_gets_an_empty_well_formed_answer(
    fake_endpoint: InProcessEndpoint, audio_format: str
) -> None:
    async with connect(fake_endpoint.ws_url) as ws:
        await send_json(ws, {"text": "?!... (((", "request_id": "quiet", "format": audio_format})
        await send_json(ws, {"text": SHORT, "speed": FAST, "request_id": "loud", "format": audio_format})
        quiet, loud = (await read_answers(ws, 2)).answers
    assert quiet.error is None and quiet.complete is not None, quiet
    assert quiet.audio == [] and quiet.complete.timings.audio_s == 0 and quiet.complete.timings.chunks == 0
    assert loud.complete is not None and loud.audio


async def test_fake_client_strings_are_not_echoed_or_logged_in_full(
    fake_endpoint: InProcessEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)  # as the server runs: its records land here, from its own thread
    marker = "Q7zX" * 15_000  # 60 KB
    async with connect(fake_endpoint.ws_url, max_size=None) as ws:
        await send_json(ws, {"type": marker})
        error = await next_control(ws)
        assert isinstance(error, Error) and error.code == ErrorCode.UNKNOWN_TYPE and len(error.message) < 300
        await send_json(ws, {"text": "Zyx... !!! ...", "request_id": "private"})  # nothing speakable
        assert (await read_answers(ws, 1)).answers[0].complete is not None
    assert "rejected message" in caplog.text  # the log was captured: what follows is not vacuous
    assert marker[:200] not in caplog.text
    assert "Zyx" not in caplog.text  # the user's text is logged at DEBUG only
