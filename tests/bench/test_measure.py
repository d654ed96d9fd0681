"""The accounting checker that the load bench's verdict rests on: it must catch every kind of miscount."""

from __future__ import annotations

from voicecli.bench.measure import RequestTrace, Trace, check_exact


def finished(rid: str, starts: int = 1, dones: int = 1, size: int = 100) -> RequestTrace:
    return RequestTrace(rid, sent=0.0, starts=starts, dones=dones, first_byte=1.0, done=2.0, bytes=size)


def trace(requests: list[RequestTrace], starts: list[str], dones: list[str], stray: int = 0) -> Trace:
    return Trace(0.0, requests, starts, dones, stray)


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
