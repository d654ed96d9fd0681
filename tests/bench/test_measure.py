"""The accounting checker that the load bench's verdict rests on (it must catch every kind of miscount), and the wait
between a bench's turns."""

from __future__ import annotations

import time

from voicecli.bench.measure import Trace, check_exact, wait_played
from voicecli.tts.consumer import RequestAudio
from voicecli.wire.playout import Playout
from voicecli.wire.protocol import Timings


def finished(rid: str, starts: int = 1, dones: int = 1, size: int = 100) -> RequestAudio:
    return RequestAudio(rid, sent=0.0, starts=starts, dones=dones, first_byte=1.0, done=2.0, bytes=size)


def trace(requests: list[RequestAudio], starts: list[str], dones: list[str], stray: int = 0) -> Trace:
    return Trace(0.0, requests, starts, dones, stray)


def seconds(audio_s: float) -> Timings:
    return Timings(queue_wait_ms=0.0, synthesis_ms=0.0, encoding_ms=0.0, audio_s=audio_s)


def test_a_clean_trace_is_exact() -> None:
    assert check_exact(trace([finished("a"), finished("b")], ["a", "b"], ["a", "b"])) == []


def test_out_of_order_completion_is_reported() -> None:
    problems = check_exact(trace([finished("a"), finished("b")], ["b", "a"], ["b", "a"]))
    assert any("order" in p for p in problems)


def test_lost_and_duplicated_requests_are_reported() -> None:
    lost = check_exact(trace([finished("a"), finished("b", starts=0, dones=0)], ["a"], ["a"]))
    assert any("b: 0 start(s), 0 completion(s)" in p for p in lost)
    duplicated = check_exact(trace([finished("a", starts=2, dones=2)], ["a", "a"], ["a", "a"]))
    assert any("a: 2 start(s), 2 completion(s)" in p for p in duplicated)


def test_silent_requests_and_stray_audio_are_reported() -> None:
    assert any("no audio" in p for p in check_exact(trace([finished("a", size=0)], ["a"], ["a"])))
    assert any("outside" in p for p in check_exact(trace([finished("a")], ["a"], ["a"], stray=1)))


def test_playout_spreads_each_request_over_its_chunks_and_counts_the_silences() -> None:
    first = RequestAudio("a", bytes=300, arrivals=[(0.0, 100), (0.5, 200)], timings=seconds(3.0))  # 1 s, then 2 s
    second = RequestAudio("b", bytes=100, arrivals=[(4.5, 100)], timings=seconds(1.0))  # the first ended at 3.0
    listener = Trace(0.0, [first, second]).playout()
    assert listener.stalled_s == 1.5 and listener.stalls == 1 and listener.end == 5.5


def test_load_scaling_is_the_largest_n_over_one_session() -> None:
    from voicecli.bench.load import scaling

    rows = [{"sessions": 1, "audio_rate_x": 4.0}, {"sessions": 2, "audio_rate_x": 7.0},
            {"sessions": 4, "audio_rate_x": 7.2}]
    assert scaling(rows) == (4, 1.8)
    assert scaling(rows[1:]) is None and scaling(rows[:1]) is None


def listener(first_audio_at: float, audio_s: float) -> Playout:
    played = Playout()
    played.add(first_audio_at, audio_s)
    return played


async def test_wait_played_waits_for_the_answer_to_play_at_real_time() -> None:
    """The next turn of a bench starts after the last answer would have played (not as soon as its bytes are in)."""
    started = time.monotonic()
    await wait_played(listener(started - 0.1, 0.3))  # first audio 0.1 s ago, 0.3 s of audio: 0.2 s left to play
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    await wait_played(listener(started - 5.0, 1.0))  # played out long ago: only the margin
    await wait_played(Playout())  # no audio came: nothing to wait for
    assert time.monotonic() - started < 2.0
