"""Transcript-aware end of turn: which words sound finished, and the hang-over each gets."""

from __future__ import annotations

import pytest

from voicecli.listen.turn_completion import Completion, TurnEndPolicy, classify, heard_sentence_end


@pytest.mark.parametrize("text", [
    "What is the capital of France?",
    "Name a large animal.",
    "Tell me a joke!",
    "Can you help me?",
    "How many legs does a spider have?",
    "Do you know what time it is?",
    "What is that?",
    "Why?",
    "Thanks",
    " What color is the sky? ",
])
def test_finished_turns(text: str) -> None:
    assert classify(text) is Completion.COMPLETE


@pytest.mark.parametrize("text", [
    "What is the capital of",
    "What is the capital of.",  # tiny.en puts a period after nearly everything
    "Tell me about the",
    "I want to go to,",
    "How many days are in a...",
    "So, um.",
    "Could you tell me about",
    "The answer is.",
    "What I want to know is",
    "The weather in Paris and",
    "What is the tallest mountain in the world -",
])
def test_unfinished_turns(text: str) -> None:
    assert classify(text) is Completion.INCOMPLETE


@pytest.mark.parametrize("text", ["", "   ", "What is the capital of France", "hello there"])
def test_undecided_turns(text: str) -> None:
    assert classify(text) is Completion.UNSURE


def test_a_heard_sentence_end_is_a_final_stop_question_or_exclamation_mark_not_an_ellipsis() -> None:
    assert heard_sentence_end("Which planet do we live on?") and heard_sentence_end(' "The answer is no." ')
    assert heard_sentence_end("Stop!")
    assert not heard_sentence_end("What is the capital of...") and not heard_sentence_end("So…")
    assert not heard_sentence_end("what is the capital of") and not heard_sentence_end("")


def test_policy_picks_the_hang_over_from_the_words() -> None:
    policy = TurnEndPolicy(default_ms=700, complete_ms=300, incomplete_ms=1400)
    assert policy.silence_ms("What is the capital of France?") == 300
    assert policy.silence_ms("What is the capital of") == 1400
    assert policy.silence_ms("what is the capital of france") == 700
    assert policy.silence_ms(None) == 700
    off = TurnEndPolicy(default_ms=700, transcript_aware=False)
    assert off.silence_ms("What is the capital of France?") == 700
