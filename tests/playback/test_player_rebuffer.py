"""voicecli.playback.player.Rebuffer: when an answer that ran dry plays on (the player's own test, over a real
PulseAudio speaker, is test_player.py's test_an_answer_coming_slower_than_real_time_pauses_instead_of_stuttering)."""

from __future__ import annotations

from voicecli.playback.player import Rebuffer


def test_a_dry_answer_waits_for_audio_to_build_up_doubling_each_time() -> None:
    rebuffer = Rebuffer(1000, 0.25, max_s=1.0)
    assert not rebuffer.holding("a", 0, False)  # never ran dry: whatever comes plays at once
    assert rebuffer.dry("a")
    assert rebuffer.holding("a", 0, False) and rebuffer.holding("a", 249, False)
    assert not rebuffer.holding("a", 250, False)  # 250 ms at hand: it plays on
    assert not rebuffer.holding("a", 0, False)  # and keeps playing until it runs dry again
    rebuffer.dry("a")
    assert rebuffer.holding("a", 499, False) and not rebuffer.holding("a", 500, False)  # the wait doubled
    for _ in range(3):
        rebuffer.dry("a")
    assert rebuffer.holding("a", 999, False) and not rebuffer.holding("a", 1000, False)  # at most max_s


def test_the_end_of_an_answer_or_the_next_answer_ends_the_wait() -> None:
    rebuffer = Rebuffer(1000, 0.25)
    rebuffer.dry("a")
    assert not rebuffer.holding("a", 10, True)  # all of it was written: play out what there is
    rebuffer.dry("a")
    assert not rebuffer.holding("b", 0, False)  # the next answer's first sample never waits
    rebuffer.dry("b")
    assert rebuffer.holding("b", 249, False) and not rebuffer.holding("b", 250, False)  # a new answer starts at 250
    rebuffer.dry("b")
    rebuffer.cancel()  # stop(): a barge-in
    assert not rebuffer.holding("b", 0, False)


def test_off_never_waits() -> None:
    rebuffer = Rebuffer(1000, 0.0)
    assert not rebuffer.dry("a") and not rebuffer.holding("a", 0, False)
