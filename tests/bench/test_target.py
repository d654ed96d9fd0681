"""Parsing of `--rtt-ms` and `--sessions`: repeatable or comma lists, checked, sorted, de-duplicated."""

from __future__ import annotations

import pytest

from voicecli.bench.target import BenchError, parse_counts, parse_rtts


def test_rtts_accept_repeats_and_comma_lists() -> None:
    assert parse_rtts(None) == [0.0]
    assert parse_rtts(["50", "0,20", "50"]) == [0.0, 20.0, 50.0]


@pytest.mark.parametrize("bad", ["fast", "-5", "20000"])
def test_bad_rtts_are_refused_with_the_reason(bad: str) -> None:
    with pytest.raises(BenchError, match="rtt-ms"):
        parse_rtts([bad])


def test_session_counts() -> None:
    assert parse_counts(None, "1,2,4,8", "--sessions") == [1, 2, 4, 8]
    assert parse_counts(["4", "1,2"], "1", "--sessions") == [1, 2, 4]
    with pytest.raises(BenchError, match="--sessions"):
        parse_counts(["0"], "1", "--sessions")
    with pytest.raises(BenchError, match="--sessions"):
        parse_counts(["two"], "1", "--sessions")
