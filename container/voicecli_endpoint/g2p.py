"""Text to misaki phonemes, the symbols Kokoro v1.0 was trained on.

Shared by every engine so they all see exactly the same phonemes. American English, no transformer model
(en_core_web_sm is enough for G2P and loads in seconds). Words misaki's lexicon does not know fall back to
espeak-ng through the libespeak-ng that `espeakng-loader` bundles, so no system package and no network is needed.

Bounded cost: misaki resolves a word group (characters with no space between them, such as "a-b-c" or "a1a2")
by trying every span of its subtokens against the lexicon, each try merging the span: cubic in the group's
subtokens (239 subtokens took ~4.5 s, 2,000 emoji or combining marks ~9 s, during which the one G2P lock held
every other session). So the text is prepared first (`prepare`): a group is cut into runs of at most
MAX_GROUP_SUBTOKENS, combining marks are capped, numbers too long to read are spelled digit by digit, and a long
text is phonemized in segments (cut at sentence ends) between which the call can be abandoned. A request's cost is
then about linear in its subtokens (`work_units`), which validation bounds beside its characters.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

UNKNOWN = "❓"
"""What misaki writes for a word it could not pronounce at all; never sent to the model."""

MAX_GROUP_SUBTOKENS = 8
"""Subtokens misaki may see in one word group ("state-of-the-art" has 7): measured here, a group of 9 takes
~5 ms and one of 31 ~50 ms, growing with the cube; longer groups are cut into runs of this many (with a space)."""
MAX_COMBINING_MARKS = 2
"""Combining marks kept on one base character (a diacritic or two); more is decoration (Zalgo text) with no sound."""
MAX_NUMBER_DIGITS = 15
"""Longer numbers are spelled digit by digit: num2words overflows near 307 digits, and nobody listens to a number
of quadrillions read as words."""
SEGMENT_SUBTOKENS = 120
"""A longer text is phonemized in segments of about this many subtokens, cut at sentence ends (where misaki's
context from the following word stops anyway), so that a cancelled request stops between two of them and waits
for no more than one segment of another request's G2P at the lock."""

_LONG_NUMBER = re.compile(r"\d(?:[\d,.]*\d)?")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


@cache
def _subtokenize() -> Callable[[str], list[str]]:
    from misaki.en import subtokenize

    return subtokenize  # type: ignore[no-any-return]


def _spell_long_number(match: re.Match[str]) -> str:
    number = match.group()
    if sum(char.isdigit() for char in number) <= MAX_NUMBER_DIGITS:
        return number
    return " ".join("point" if char == "." else char for char in number if char != ",")


def _cap_combining(text: str) -> str:
    kept: list[str] = []
    marks = 0
    for char in text:
        marks = marks + 1 if unicodedata.combining(char) else 0
        if marks <= MAX_COMBINING_MARKS:
            kept.append(char)
    return "".join(kept)


def _runs(group: str) -> Iterator[tuple[str, int]]:
    """`group` (no whitespace) as runs of at most MAX_GROUP_SUBTOKENS subtokens, each with its subtoken count."""
    subtokens = _subtokenize()(group)
    if "".join(subtokens) != group:  # misaki's pattern covers every character; if it ever did not, cut by characters
        subtokens = list(group)
    for start in range(0, len(subtokens), MAX_GROUP_SUBTOKENS):
        run = subtokens[start: start + MAX_GROUP_SUBTOKENS]
        yield "".join(run), len(run)


def prepare(text: str) -> list[list[str]]:
    """`text` as misaki can read it at a bounded cost: segments, each a list of word groups (see the module doc)."""
    return _prepared(text)[0]


def work_units(text: str) -> int:
    """What G2P of `text` costs, in misaki subtokens after `prepare` (about linear in time once prepared)."""
    return _prepared(text)[1]


def _prepared(text: str) -> tuple[list[list[str]], int]:
    """`prepare`'s segments and their subtokens in all, counted as the groups are cut (each subtokenized once)."""
    flat = _LONG_NUMBER.sub(_spell_long_number, _cap_combining(unicodedata.normalize("NFC", text)))
    segments: list[list[str]] = []
    current: list[str] = []
    size = work = 0
    for sentence in _SENTENCE_END.split(flat):
        runs = [run for group in sentence.split() for run in _runs(group)]
        if current and size + sum(cost for _, cost in runs) > SEGMENT_SUBTOKENS:
            segments.append(current)
            current, size = [], 0
        for run, cost in runs:
            if current and size + cost > SEGMENT_SUBTOKENS:  # one sentence longer than a segment: cut at a space
                segments.append(current)
                current, size = [], 0
            current.append(run)
            size += cost
            work += cost
    if current:
        segments.append(current)
    return segments, work


@dataclass(frozen=True)
class Spelled:
    """A text's phonemes (as `Phonemizer.__call__` gives them) with the word each character belongs to.

    `words` are the text's words as misaki tokenized them, one per run of tokens between spaces ("Hello," is one);
    `owner[i]` is the index in `words` of the word phonemes[i] spells, or -1 for a space between words. None when
    the phonemes could not be traced back to words (the word times are then left out, never guessed)."""

    phonemes: str
    words: tuple[str, ...] = ()
    owner: tuple[int, ...] | None = None


def spell_words(tokens: Sequence[Any], unknown: str = UNKNOWN) -> list[tuple[str, str]]:
    """misaki's tokens as (word, its phonemes): tokens joined until one is followed by whitespace, as misaki joins
    their phonemes into its result (`phonemes + whitespace` per token)."""
    words: list[tuple[str, str]] = []
    text = phonemes = ""
    for token in tokens:
        text += str(token.text)
        phonemes += unknown if token.phonemes is None else str(token.phonemes)
        if token.whitespace:
            words.append((text, phonemes))
            text = phonemes = ""
    if text or phonemes:
        words.append((text, phonemes))
    return words


def owners_of(words: Sequence[tuple[str, str]], phonemes: str, unknown: str = UNKNOWN) -> tuple[int, ...] | None:
    """Per character of `phonemes` (spaces normalized), the index of the word it spells (-1: a space); None when
    the words' phonemes do not make up exactly `phonemes`."""
    owner: list[int] = []
    parts: list[str] = []
    for index, (_, spelled) in enumerate(words):
        for part in spelled.replace(unknown, " ").split():
            if owner:
                owner.append(-1)
            owner.extend([index] * len(part))
            parts.append(part)
    return tuple(owner) if " ".join(parts) == phonemes else None


class Phonemizer:
    """misaki `en.G2P(trf=False, british=False)` with the espeak fallback when it loads.

    Not thread-safe (spaCy and espeak keep state), so calls are serialized with a lock; the server runs them on
    its one inference thread anyway.
    """

    def __init__(self, *, espeak_fallback: bool = True) -> None:
        from misaki import en

        fallback: Any = None
        if espeak_fallback:
            try:
                from misaki import espeak

                fallback = espeak.EspeakFallback(british=False)
            except Exception:  # the fallback is an improvement, not a requirement
                log.warning("espeak-ng fallback unavailable; unknown words will be skipped", exc_info=True)
        self.has_fallback = fallback is not None
        self._g2p = en.G2P(trf=False, british=False, fallback=fallback, unk=UNKNOWN)
        self._lock = threading.Lock()

    def __call__(self, text: str, between: Callable[[], None] | None = None) -> str:
        """Phonemes of `text`, punctuation kept (the chunker splits on it), unpronounceable words dropped.

        `between` is called before each segment (see `prepare`) and may raise to abandon the rest: a cancelled
        request stops within one segment's time.
        """
        return self.spell(text, between).phonemes

    def spell(self, text: str, between: Callable[[], None] | None = None) -> Spelled:
        """`__call__`'s phonemes with the word each of their characters spells (for word times)."""
        # misaki glues sentences separated by newlines together ("Hi.\nBye." -> "hˈI.bˈI."), which would hide
        # the sentence boundary from the chunker, so all whitespace becomes single spaces (prepare splits on it).
        written: list[str] = []
        words: list[tuple[str, str]] = []
        for segment in prepare(text):
            if between is not None:
                between()
            with self._lock:
                phonemes, tokens = self._g2p(" ".join(segment))
            written.append(str(phonemes).replace(UNKNOWN, " "))
            words.extend(spell_words(tokens or ()))
        joined = " ".join(" ".join(written).split())
        return Spelled(joined, tuple(word for word, _ in words), owners_of(words, joined))
