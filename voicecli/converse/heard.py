"""What the listener heard of an answer: the words played up to a play position, and where an interruption cut it.

Why its own module: after a barge-in the history must hold what was said, not what was generated (OpenAI Realtime
truncates the item to what was played, LiveKit truncates on interruption), and the same reckoning drives the TUI's
caption and the duplex bench's check. Pure code: the pipeline feeds it play positions and word times.

A word counts as heard once its start has been played: the listener heard it begin, and the count is then right to
within one word at any cut. Word times come from the endpoint (`words` frames, in ms from the start of a sentence's
audio); without them (batch mode, another server) a sentence's played fraction of its audio is mapped onto its text
by characters, which speech follows more closely than words, and cut at a word boundary.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from voicecli.wire.protocol import WordTiming

HeardBy = Literal["timings", "fraction"]


@dataclass(frozen=True)
class HeardWords:
    """How much of one sentence was heard: `count` of its `total` words, and that text."""

    count: int
    total: int
    text: str
    by: HeardBy


@dataclass(frozen=True)
class HeardCut:
    """Where an interrupted answer was cut, for the history, the TUI and `voicecli bench duplex`.

    `sentence` is the index of the sentence being played at the cut (None: nothing of the answer had played);
    `played_s` the seconds of the answer's audio played, `sentence_played_s` those of that sentence; `words` what
    was heard of that sentence; `spoken` the whole heard text (earlier sentences + those words), which the history
    keeps and TurnFinished carries.
    """

    played_s: float
    sentence: int | None
    sentence_played_s: float
    words: HeardWords | None
    words_before: int
    """Words of the sentences before the cut one, all heard."""
    spoken: str

    @property
    def words_played(self) -> int:
        """Words of the answer heard in all."""
        return self.words_before + (0 if self.words is None else self.words.count)


def text_words(text: str) -> list[str]:
    """The words of a sentence as the history and the TUI count them: whitespace-separated."""
    return text.split()


def words_started(words: Sequence[WordTiming], played_ms: float) -> int:
    """How many of `words` (in time order) have begun by `played_ms`."""
    return bisect.bisect_left([word.start_ms for word in words], played_ms)


def current_word(words: Sequence[WordTiming], played_ms: float) -> int | None:
    """The index of the word being spoken at `played_ms` (None before the first word starts)."""
    started = words_started(words, played_ms)
    return started - 1 if started else None


def heard_by_timings(text: str, words: Sequence[WordTiming], played_ms: float) -> HeardWords:
    """The words of `text` heard by `played_ms`, from the endpoint's word times. When the endpoint counted the words
    as the text splits them (it does, bar words its G2P respelled), the heard text is the sentence's own words;
    otherwise the endpoint's."""
    count = words_started(words, played_ms)
    own = text_words(text)
    if len(own) == len(words):
        return HeardWords(count, len(own), " ".join(own[:count]), "timings")
    return HeardWords(count, len(words), " ".join(word.w for word in words[:count]), "timings")


def heard_by_fraction(text: str, played_s: float, audio_s: float) -> HeardWords:
    """The words of `text` heard after `played_s` of its `audio_s` seconds of audio, without word times: the played
    fraction of the audio taken as that fraction of the characters, counting the words begun by then."""
    own = text_words(text)
    if audio_s <= 0:
        return HeardWords(0, len(own), "", "fraction")
    reached = min(1.0, max(0.0, played_s / audio_s)) * len(" ".join(own))
    count, offset = 0, 0
    for word in own:
        if offset >= reached:
            break
        count += 1
        offset += len(word) + 1
    return HeardWords(count, len(own), " ".join(own[:count]), "fraction")


@dataclass(frozen=True)
class SentencePlay:
    """One sentence's place in its answer's audio: where its samples start, how long they are, its words' times."""

    index: int
    """Its index in the answer."""
    text: str
    start_s: float
    audio_s: float
    words: Sequence[WordTiming] = ()
    complete: bool = False
    """All its audio (and so all its words' times) has arrived."""


def locate(sentences: Sequence[SentencePlay], played_s: float) -> int | None:
    """The position in `sentences` (in play order) of the one playing at `played_s` into the answer (None: before
    any sound of it)."""
    found = None
    for index, sentence in enumerate(sentences):
        if sentence.audio_s > 0 and sentence.start_s < played_s:
            found = index
    return found


def heard_in(sentence: SentencePlay, played_s: float) -> HeardWords:
    """What was heard of one sentence once `played_s` seconds of it have played: by its words' times where they
    cover the position, else by the played fraction."""
    if sentence.words and (sentence.complete or sentence.words[-1].end_ms >= played_s * 1000):
        return heard_by_timings(sentence.text, sentence.words, played_s * 1000)
    return heard_by_fraction(sentence.text, played_s, sentence.audio_s)


def cut_at(sentences: Sequence[SentencePlay], played_s: float) -> HeardCut:
    """What an answer whose `sentences` have played for `played_s` seconds was heard as (see HeardCut)."""
    position = locate(sentences, played_s)
    if position is None:
        return HeardCut(played_s, None, 0.0, None, 0, "")
    before = [sentence.text for sentence in sentences[:position]]
    sentence = sentences[position]
    into = min(played_s - sentence.start_s, sentence.audio_s)
    words = heard_in(sentence, into)
    spoken = " ".join(part for part in [*before, words.text] if part.strip())
    return HeardCut(played_s, sentence.index, into, words, sum(len(text_words(text)) for text in before), spoken)
