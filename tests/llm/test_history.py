"""Conversation history: bounds, normalization for Bedrock, and what an interrupted answer leaves behind."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from voicecli.llm import ChatMessage
from voicecli.llm.history import Conversation, approx_tokens, chars_for_tokens


def exchange(conversation: Conversation, n: int) -> None:
    conversation.add_user(f"question {n}")
    conversation.add_assistant(f"answer {n}")


def test_keeps_at_most_max_turns_exchanges_plus_the_question() -> None:
    conversation = Conversation(max_turns=4)
    for n in range(5):
        exchange(conversation, n)  # the fifth exchange overflows: back to the last two
    conversation.add_user("question 5")
    assert conversation.messages() == [
        ChatMessage("user", "question 3"),
        ChatMessage("assistant", "answer 3"),
        ChatMessage("user", "question 4"),
        ChatMessage("assistant", "answer 4"),
        ChatMessage("user", "question 5"),
    ]
    assert len(conversation) == 5  # storage is bounded too, not just the view


def test_the_window_moves_in_steps_so_the_prompt_prefix_stays_put() -> None:
    """Each prompt extends the previous one except at an overflow, which happens once every max_turns / 2 + 1 turns
    (a window sliding one exchange per turn would change the prompt's start every turn: a full re-read)."""
    conversation = Conversation(max_turns=8)
    previous: list[ChatMessage] = []
    rewrites = []
    for n in range(30):
        conversation.add_user(f"question {n}")
        prompt = conversation.messages()
        assert sum(m.role == "user" for m in prompt) <= 9
        if prompt[: len(previous)] != previous:
            rewrites.append(n)
        conversation.add_assistant(f"answer {n}")
        previous = [*prompt, ChatMessage("assistant", f"answer {n}")]  # what the LLM's context now holds
    assert rewrites == [9, 14, 19, 24, 29]


def test_speculative_context_equals_the_confirmed_one() -> None:
    """A speculative answer is generated from messages_with(); the confirmed turn must send the same prompt,
    or the LLM re-reads it (and the speculation answered a different context)."""
    conversation = Conversation(max_turns=2, max_chars=80)
    for n in range(7):
        trial = conversation.messages_with(f"question {n}")
        conversation.add_user(f"question {n}")
        assert conversation.messages() == trial
        conversation.add_assistant(f"answer {n} " + "x" * (n * 7))


def test_zero_turns_sends_only_the_question() -> None:
    conversation = Conversation(max_turns=0)
    exchange(conversation, 0)
    conversation.add_user("next")
    assert conversation.messages() == [ChatMessage("user", "next")]


def test_character_budget_drops_oldest_turns_first() -> None:
    conversation = Conversation(max_turns=10, max_chars=60)
    conversation.add_user("a" * 30)
    conversation.add_assistant("b" * 20)
    conversation.add_user("c" * 10)
    conversation.add_assistant("d" * 10)  # 70 characters: over the budget, down to half of it
    assert [m.content[0] for m in conversation.messages()] == ["c", "d"]
    conversation.add_user("e" * 20)
    assert [m.content[0] for m in conversation.messages()] == ["c", "d", "e"]


def test_an_oversized_question_is_still_sent() -> None:
    conversation = Conversation(max_chars=10)
    exchange(conversation, 0)
    conversation.add_user("x" * 100)
    assert conversation.messages() == [ChatMessage("user", "x" * 100)]


def test_interrupted_answer_keeps_only_what_was_spoken() -> None:
    conversation = Conversation()
    conversation.add_user("Tell me about Paris.")
    conversation.add_interrupted("Paris is the capital of France. It has ")
    conversation.add_user("What about Berlin?")
    assert conversation.messages() == [
        ChatMessage("user", "Tell me about Paris."),
        ChatMessage("assistant", "Paris is the capital of France. It has…"),
        ChatMessage("user", "What about Berlin?"),
    ]


def test_interruption_before_any_speech_merges_the_questions() -> None:
    conversation = Conversation()
    conversation.add_user("Tell me a story")
    conversation.add_interrupted("   ")
    conversation.add_user("a short one")
    assert conversation.messages() == [ChatMessage("user", "Tell me a story\na short one")]


def test_context_never_opens_with_the_assistant_and_blank_text_is_ignored() -> None:
    conversation = Conversation()
    conversation.add_assistant("Hello! How can I help?")
    conversation.add_user("  ")
    assert conversation.messages() == []


def test_rejects_negative_bounds() -> None:
    with pytest.raises(ValueError):
        Conversation(max_turns=-1)


def test_token_approximation() -> None:
    assert approx_tokens("") == 0
    assert approx_tokens("abcde") == 2
    assert chars_for_tokens(10) == 40


events = st.lists(st.tuples(st.sampled_from(["user", "assistant", "interrupted"]), st.text(max_size=30)), max_size=40)


@given(events, st.integers(min_value=0, max_value=5), st.integers(min_value=0, max_value=200))
def test_context_is_always_valid_for_bedrock(script: list[tuple[str, str]], max_turns: int, max_chars: int) -> None:
    conversation = Conversation(max_turns=max_turns, max_chars=max_chars)
    for kind, text in script:
        {
            "user": conversation.add_user,
            "assistant": conversation.add_assistant,
            "interrupted": conversation.add_interrupted,
        }[kind](text)
    context = conversation.messages()
    if context:
        assert context[0].role == "user"
        assert all(a.role != b.role for a, b in itertools.pairwise(context))
        assert all(m.content.strip() for m in context)
        assert sum(m.role == "user" for m in context) <= max_turns + 1
        # Everything before the final turn fits the character budget.
        last_user = max(i for i, m in enumerate(context) if m.role == "user")
        earlier = context[:last_user]
        assert sum(len(m.content) for m in earlier) + sum(len(m.content) for m in context[last_user:]) <= max(
            max_chars, sum(len(m.content) for m in context[last_user:])
        )
