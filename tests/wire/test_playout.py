"""The real-time listener model shared by the endpoint's scheduler and `voicecli bench load`."""

from __future__ import annotations

from voicecli.wire.playout import Playout


def test_audio_arriving_in_time_never_stalls() -> None:
    listener = Playout()
    listener.add(10.0, 2.0)  # plays 10..12
    listener.add(11.5, 1.0)  # queued behind: plays 12..13
    assert listener.ahead_s(11.5) == 1.5 and listener.stalled_s == 0 and listener.stalls == 0


def test_a_late_chunk_adds_the_silence_before_it() -> None:
    listener = Playout()
    listener.add(0.0, 1.0)
    listener.add(1.75, 1.0)  # ran dry at 1.0
    listener.add(2.0, 0.5)
    assert listener.stalled_s == 0.75 and listener.stalls == 1 and listener.end == 3.25


def test_nothing_received_or_run_dry_is_zero_ahead() -> None:
    listener = Playout()
    assert listener.ahead_s(5.0) == 0.0
    listener.add(0.0, 1.0)
    assert listener.ahead_s(3.0) == 0.0
