"""When each word of a request is spoken, from Kokoro's predicted durations: the `words` frames of the protocol.

Why from the durations: Kokoro predicts how many frames (600 samples each: decoder_parts.FRAME_SAMPLES) every input
token lasts, and the decoder renders exactly that many, so the durations are where each phoneme sits in the audio,
at no extra cost. Three maps lead from them to a word's time in the audio the client decodes:

1. token -> character: the engine feeds the model a boundary token, one token per phoneme symbol it knows
   (`TimedAudio.symbols`, a subsequence of the piece; others are dropped), and a boundary token;
2. character -> word: G2P spelled the text word by word (`g2p.Spelled.owner`), and every piece is a substring of
   the spelled phonemes (chunking cuts only at spaces, or inside an over-long word);
3. raw sample -> sent sample: the piece's leading silence is trimmed (`SilenceTrimmer.lead_dropped`), and its
   trailing silence too, so times are shifted and clipped to the samples kept.

A word starts at its first phoneme and ends where the next word starts (the space and pause after it are its own);
the last word of a piece ends with the piece's audio, so a piece's words tile it and a request's words its audio. A
word with no phoneme (a dash, an emoji) lasts 0 ms where the next one starts.

When: a piece sent in parts (a turn's first) has its times from the first part on (the durations come before any
audio is decoded), so all its words but the last go out with the first part, and the last, whose end is where the
trimmed tail ends, with the piece's last audio (`piece_words`). Why: a listener who interrupts while the first part
plays must be told which words it heard; with no times yet, the client took the played share of the audio received
so far for the share of the sentence heard, and a whole clause that never played went into the history
(bench duplex, duplex-20261205-settle: "The voice assistant is a sentient AI entity," kept for "The voice assistant"
heard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voicecli_endpoint.engines.base import TimedAudio
from voicecli_endpoint.engines.decoder_parts import FRAME_SAMPLES
from voicecli_endpoint.g2p import Spelled

SPACE = -1
"""The owner of a character between two words."""


@dataclass(frozen=True)
class WordSpan:
    """Word `index` of the request (its text `text`) spoken over samples [start, end) of a piece's sent audio."""

    index: int
    text: str
    start: int
    end: int


def piece_owners(spelled: Spelled, pieces: Sequence[str]) -> list[tuple[int, ...] | None]:
    """Per piece (in order), the word owning each of its characters; None where it cannot be told (a spelling
    without owners, a piece not found where it should be)."""
    if spelled.owner is None:
        return [None] * len(pieces)
    owners: list[tuple[int, ...] | None] = []
    cursor = 0
    for piece in pieces:
        at = spelled.phonemes.find(piece, cursor)
        if at < 0:
            owners.append(None)
            continue
        owners.append(spelled.owner[at: at + len(piece)])
        cursor = at + len(piece)
    return owners


def char_starts(piece: str, symbols: str, durations: npt.NDArray[np.int64]) -> list[int | None]:
    """The raw sample at which each character of `piece` starts (None: a character the model never saw).
    `durations` has one entry per token: a boundary, one per symbol of `symbols`, a boundary."""
    starts: list[int | None] = []
    frame = int(durations[0]) if len(durations) else 0
    known = 0
    for char in piece:
        if known < len(symbols) and symbols[known] == char and known + 1 < len(durations):
            starts.append(frame * FRAME_SAMPLES)
            frame += int(durations[known + 1])
            known += 1
        else:
            starts.append(None)
    return starts


def word_starts(owners: Sequence[int], starts: Sequence[int | None]) -> dict[int, int]:
    """The raw sample at which each word starting in this piece starts: its first character the model saw."""
    first: dict[int, int] = {}
    for owner, start in zip(owners, starts, strict=True):
        if owner != SPACE and start is not None and owner not in first:
            first[owner] = start
    return first


def spans(spelled: Spelled, owners: Sequence[int], starts: Sequence[int | None], after: int, lead_dropped: int,
          length: int) -> list[WordSpan]:
    """The words of one piece in its sent audio (`length` samples kept, `lead_dropped` raw samples trimmed before
    them): those starting in it, plus the soundless ones since word `after` (the last word already timed) before
    them. Times are clipped to the kept audio: the first word starts with it, the last ends with it."""
    first = word_starts(owners, starts)
    if not first:
        return []
    last = max(first)
    timed: list[tuple[int, int]] = []
    pending: list[int] = []
    for index in range(after + 1, last + 1):
        if index not in first:
            pending.append(index)
            continue
        # The piece's first word starts with its audio (its lead silence is the word's, as a pause after one is).
        start = max(timed[-1][1], min(length, max(0, first[index] - lead_dropped))) if timed else 0
        timed.extend((word, start) for word in pending)
        pending.clear()
        timed.append((index, start))
    ends = [start for _, start in timed[1:]] + [length]
    return [WordSpan(index, spelled.words[index], start, end) for (index, start), end in zip(timed, ends, strict=True)]


def piece_words(spelled: Spelled, owners: Sequence[int], phonemes: str, timed: TimedAudio, after: int,
                lead_dropped: int, kept: int, complete: bool) -> list[WordSpan]:
    """The words of one piece that can be sent now (see the module docstring): once its audio is `complete`, all
    that start in it, clipped to the `kept` samples; before, all but the last, timed against the untrimmed rest of
    the piece (the durations' length), whose end is the last one's start either way."""
    starts = char_starts(phonemes, timed.symbols, timed.durations)
    if complete:
        return spans(spelled, owners, starts, after, lead_dropped, kept)
    whole = int(np.sum(timed.durations)) * FRAME_SAMPLES - lead_dropped
    return spans(spelled, owners, starts, after, lead_dropped, max(kept, whole))[:-1]
