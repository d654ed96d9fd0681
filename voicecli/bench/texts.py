"""The fixed texts every bench run speaks, committed so results from different days and machines compare.

Why fixed: time to first audio depends on how long the first piece of text is (synthesis time grows with it), so
a benchmark that picked its text at random, or let an LLM write it, would measure the text rather than the
transport. The paragraph's first sentence has a clause boundary after eleven words, so the fast first fragment
(the Segmenter's `first_fragment_words`) has something to cut.
"""

from __future__ import annotations

PARAGRAPH_SENTENCES: tuple[str, ...] = (
    "Voice assistants feel slow when they wait for the whole answer, even though the first sentence was ready "
    "long before.",
    "Streaming each sentence to the speech model as soon as it is complete lets the listener hear the answer "
    "almost at once.",
    "One connection stays open for the whole conversation, so no sentence pays for a new handshake.",
    "While the first sentence plays, the next ones are already being synthesized.",
    "The result is a conversation that feels natural instead of sluggish.",
)
"""Five sentences, about 80 words: the batch variant sends them as one text, the bidi variants one by one."""

QUICK_SENTENCES: tuple[str, ...] = (
    "Short answers start quickly, even on a small machine.",
    "This one is brief.",
    "It ends here.",
)
"""A tiny paragraph for smoke runs and tests (`--texts quick`): seconds instead of minutes on a CPU."""

TEXT_SETS: dict[str, tuple[str, ...]] = {"paragraph": PARAGRAPH_SENTENCES, "quick": QUICK_SENTENCES}

LOAD_SENTENCES: tuple[str, ...] = (
    "The sky is blue.",
    "Bees make honey.",
    "Rain falls down.",
    "Cats like naps.",
    "Tea is warm.",
    "Stars shine bright.",
    "Birds can sing.",
    "Snow is cold.",
    "Trees grow tall.",
    "Waves reach shore.",
    "Bread smells good.",
    "Clocks keep time.",
)
"""Short, distinct sentences for the load generator (session k, request i speaks LOAD_SENTENCES[(k+i) % 12])."""

E2E_SYSTEM_PROMPT = (
    "You are a helpful voice assistant. Answer in three or four short spoken sentences, without lists or markdown."
)
"""Asks for a few sentences so bidi has something to overlap (SmolLM2's answers are short otherwise)."""

E2E_PROMPTS: tuple[str, ...] = (
    "Why is the sky blue?",
    "How do bees make honey?",
    "What makes a good cup of tea?",
)
"""Run i of each mode asks E2E_PROMPTS[i % 3]; generation is greedy (temperature 0), so both modes speak the
same answer and the comparison is of the transport path alone."""


def paragraph(sentences: tuple[str, ...]) -> str:
    return " ".join(sentences)
