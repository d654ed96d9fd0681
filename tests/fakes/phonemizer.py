"""A phonemizer with the call of `voicecli_endpoint.g2p.Phonemizer` and none of its loading.

Why: the real one builds misaki's G2P, which loads spaCy's en_core_web_sm and espeak-ng (seconds, and a model);
the fast tier's endpoint needs "text in, a string the chunker can cut out" and nothing of pronunciation. The text
comes back lower-cased with its punctuation kept (the chunker cuts pieces at sentence and clause marks) and its
whitespace collapsed, as the real phonemizer's is. `between` is called before each sentence, as the real one calls
it before each segment, so a cancelled request's G2P still stops early. Misaki's output stays tested in
tests/endpoint/test_g2p.py (slow tier).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from voicecli_endpoint.g2p import Spelled

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


class FakePhonemizer:
    """`Phonemizer(...)` and `phonemizer(text, between)` as the endpoint calls them (see the module docstring)."""

    def __init__(self, *, espeak_fallback: bool = True) -> None:
        self.has_fallback = False
        self.texts: list[str] = []
        """Every text phonemized, in order (warm-up included)."""

    def __call__(self, text: str, between: Callable[[], None] | None = None) -> str:
        self.texts.append(text)
        written: list[str] = []
        for sentence in _SENTENCE_END.split(text):
            if between is not None:
                between()
            written.append(sentence.lower())
        return " ".join(" ".join(written).split())

    def spell(self, text: str, between: Callable[[], None] | None = None) -> Spelled:
        """The call's phonemes with their words: each text word is spelled as itself, lower-cased."""
        phonemes = self(text, between)
        words = tuple(text.split())
        owner: list[int] = []
        for index, word in enumerate(phonemes.split()):
            owner.extend(([-1] if owner else []) + [index] * len(word))
        return Spelled(phonemes, words, tuple(owner) if len(words) == len(phonemes.split()) else None)
