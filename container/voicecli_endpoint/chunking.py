"""Split a phoneme string into the pieces synthesized one at a time.

Kokoro's own pipeline makes a whole paragraph one segment, so nothing can be heard until all of it is
synthesized. Here every sentence is its own piece, and its audio is sent the moment it exists. Synthesis time
grows with length, so the FIRST piece is also cut at its first clause boundary (comma, semicolon, colon, dash)
once that clause is long enough to sound natural: that is what sets the time to first audio. A long later
sentence is cut at its clause boundaries too (`ChunkPolicy.long_sentence`): a piece's audio exists only when all of
it is synthesized, so one long piece would make the listener wait at its start for its end, and would hold an
inference worker that long while other sessions wait. Every piece stays within the model's 510-symbol context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PHONEMES = 510
"""Kokoro-82M's context: 512 tokens including the two padding tokens."""

_CLOSERS = "\"\u201d\u2019)\\]"  # closing quotes and brackets that stay with the mark before them
_SENTENCE_END = re.compile(rf"[.!?\u2026][{_CLOSERS}]*(\s+)")
_CLAUSE_END = re.compile(rf"[,;:\u2014\u2013][{_CLOSERS}]*(\s+)")


@dataclass(frozen=True)
class ChunkPolicy:
    """Where pieces are cut. Lengths are in phoneme symbols (about 5 per English word)."""

    first_clause_min: int = 20
    """Cut the first sentence at its first clause boundary once the head is at least this long (0: never)."""
    long_sentence: int = 120
    """Cut a sentence longer than this (about 10 s of speech) at clause boundaries into pieces no longer, where
    its clauses allow (0: never). Clauses are never split: a clause longer than this stays whole."""
    max_len: int = MAX_PHONEMES


def _speakable(piece: str) -> bool:
    """Pieces of bare punctuation make Kokoro emit noise; they are dropped."""
    return any(ch.isalpha() for ch in piece)


def _split_keep(pattern: re.Pattern[str], text: str) -> list[str]:
    """Split at the whitespace group of each match, keeping the marks with the text before them."""
    parts, start = [], 0
    for match in pattern.finditer(text):
        parts.append(text[start : match.start(1)])
        start = match.end(1)
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _pack(parts: list[str], limit: int) -> list[str]:
    """Join consecutive parts with spaces into pieces no longer than `limit` (a part over it stays alone)."""
    out: list[str] = []
    for part in parts:
        if out and len(out[-1]) + 1 + len(part) <= limit:
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def _fit(sentence: str, limit: int) -> list[str]:
    """Cut an over-long sentence at clauses, then at word boundaries, then anywhere, to stay within `limit`."""
    if len(sentence) <= limit:
        return [sentence]
    pieces: list[str] = []
    for clause in _pack(_split_keep(_CLAUSE_END, sentence), limit):
        if len(clause) <= limit:
            pieces.append(clause)
            continue
        for word_run in _pack(clause.split(" "), limit):
            pieces.extend(word_run[i : i + limit] for i in range(0, len(word_run), limit))
    return pieces


def _cut_first_clause(sentence: str, min_len: int) -> list[str]:
    """Split off the first clause of at least `min_len` symbols when something speakable follows it."""
    for match in _CLAUSE_END.finditer(sentence):
        head, tail = sentence[: match.start(1)].strip(), sentence[match.end(1) :].strip()
        if len(head) >= min_len:
            return [head, tail] if _speakable(tail) else [sentence]
    return [sentence]


def chunk_phonemes(phonemes: str, policy: ChunkPolicy = ChunkPolicy()) -> list[str]:
    """The pieces of `phonemes`, in order, each speakable and at most `policy.max_len` symbols."""
    pieces: list[str] = []
    for index, sentence in enumerate(_split_keep(_SENTENCE_END, " ".join(phonemes.split()))):
        parts = [sentence]
        if index == 0 and policy.first_clause_min > 0:
            parts = _cut_first_clause(sentence, policy.first_clause_min)
        for part in parts:
            if 0 < policy.long_sentence < len(part):
                clauses = _pack(_split_keep(_CLAUSE_END, part), policy.long_sentence)
            else:
                clauses = [part]
            for clause in clauses:
                pieces.extend(_fit(clause, policy.max_len))
    return [piece for piece in pieces if _speakable(piece)]
