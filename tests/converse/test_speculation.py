"""voicecli.converse.speculation: a guess's states, what it holds, and the counts it keeps, without any model."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from voicecli.converse.speculation import Speculation, SpeculationError
from voicecli.converse.timeline import SpeculationCounts


def audio(value: float) -> np.ndarray:
    return np.full(4, value, np.float32)


async def test_a_confirmed_guess_hands_over_what_it_held_in_order_then_holds_nothing() -> None:
    counts = SpeculationCounts()
    guess: Speculation[str] = Speculation("How many legs does a spider have?", 3, counts)
    assert (guess.state, guess.holds, guess.decided, counts.started) == ("drafted", True, False, 1)
    guess.hold_event("TurnStarted")
    guess.hold_audio(audio(0.1))
    guess.hold_event("SentenceQueued")
    guess.hold_audio(audio(0.2))
    verdict = asyncio.ensure_future(guess.verdict())
    await asyncio.sleep(0)
    assert not verdict.done()  # undecided: whoever answers it waits
    assert guess.confirm({"turn_confirmed": 2.0})
    assert await verdict and guess.state == "confirmed" and guess.holds  # held until the pipeline releases it
    assert guess.confirmed_marks == {"turn_confirmed": 2.0}
    events, held = guess.release()
    assert events == ["TurnStarted", "SentenceQueued"] and [float(a[0]) for a in held] == pytest.approx([0.1, 0.2])
    assert guess.state == "released" and not guess.holds
    guess.hold_audio(audio(0.3))  # from here on the answer plays as it comes: nothing is kept back
    assert guess.held_audio == ()
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 1, 0)


async def test_a_withdrawn_guess_drops_what_it_held_and_its_verdict_is_final() -> None:
    counts = SpeculationCounts()
    guess: Speculation[str] = Speculation("How many legs", 1, counts=counts)
    guess.hold_event("TurnStarted")
    guess.hold_audio(audio(0.1))
    assert guess.withdraw()
    assert guess.withdrawn and not guess.holds and guess.held_audio == ()
    assert not await guess.verdict()
    assert not guess.confirm() and not guess.withdraw()  # decided once: a late confirmation changes nothing
    guess.hold_audio(audio(0.2))
    assert guess.held_audio == ()  # a withdrawn answer's late audio is not kept either
    with pytest.raises(SpeculationError):
        guess.release()
    assert (counts.started, counts.confirmed, counts.cancelled) == (1, 0, 1)


def test_only_the_same_utterance_with_the_same_words_confirms_a_guess() -> None:
    guess: Speculation[str] = Speculation("What is two plus two?", 5)
    assert guess.confirmed_by(5, "What is two plus two?")
    assert not guess.confirmed_by(6, "What is two plus two?")  # another utterance
    assert not guess.confirmed_by(5, "What is two plus two equal to?")  # other words: answered from scratch
    guess.withdraw()
    assert not guess.confirmed_by(5, "What is two plus two?")  # withdrawn: nothing left to confirm


def test_guesses_at_one_user_turn_share_its_counts_and_a_confirmed_one_cannot_be_withdrawn() -> None:
    counts = SpeculationCounts()
    first: Speculation[str] = Speculation("How many", 1, counts=counts)
    first.withdraw()  # the user went on speaking
    second: Speculation[str] = Speculation("How many legs does a spider have?", 1, counts=counts)
    assert second.confirm()
    assert not second.withdraw() and second.state == "confirmed"  # a barge-in now is an ordinary interruption
    assert (counts.started, counts.confirmed, counts.cancelled) == (2, 1, 1)
    with pytest.raises(SpeculationError):
        Speculation("x", 1).release()  # never confirmed
