"""Streaming sentence segmentation: LLM text deltas in, speakable sentences out.

WHY: time to first audio is dominated by how long we wait before the first TTS request. Waiting for the
whole answer (or for a regex over the whole answer) throws away everything streaming buys us, so each
sentence leaves here the moment it is *certainly* complete, and the first one may leave even earlier, at a
clause boundary.

The pipeline has three stages, each a deterministic function of the text seen so far that commits a
decision only when no later text can change it. That is what makes the output independent of how the
LLM happens to chunk its deltas (the property tests check exactly this):

1. ``voicecli.converse.speakable.MarkdownStripper`` turns markdown into speakable plain text. It marks *hard breaks*
   (paragraph breaks, list items, headings, table rows, code blocks, rules) with ``"\\n"``; a soft line wrap inside a
   paragraph or list item becomes a space. It holds back only constructs it cannot decide yet (an opened
   ``[`` that may become a link, a ``<`` that may become an HTML tag, a line start that may become a
   fence, ...), and every such construct is bounded (one line, a few hundred characters).
2. ``_SentenceSplitter`` cuts the plain text into sentences (and cuts the first one early, see below).
3. ``_ShortMerger`` merges tiny sentences into the following one.

Decisions (pinned by tests/converse/test_segmentation.py):

- A sentence ends after a terminator run (``.``, ``!``, ``?``, ``...``, ``…``) plus any closing
  quotes/brackets, followed by whitespace and a plausible sentence start (an upper-case or case-less letter,
  a digit, an opening quote/bracket, a currency sign). Lower case after the terminator means the sentence
  goes on. A hard break always ends a sentence. Cuts only ever happen at whitespace, so joining the pieces
  with single spaces gives back the speakable text exactly.
- Never cut after: titles and company suffixes (Dr. Mr. Mrs. Ms. Prof. St. Jr. Sr. vs. Inc. Ltd. Corp.
  Co. ...), initialisms with inner periods (e.g. i.e. U.S. U.K. a.m. p.m. Ph.D.), a single upper-case
  initial (John F. Kennedy), No./Vol./p./Jan. ... when a number follows, a small list number (``1.``) that
  opens the sentence or follows a colon ("Steps: 1. Mix. 2. Bake." -> "Steps: 1. Mix." / "2. Bake.").
  ``etc.`` is an ordinary word: it ends the sentence when a capital follows. Periods not followed by
  whitespace (3.14, v2.0, 1.2.3, example.com/a.b, john.doe@mail.co.uk) are never candidates.
  Not cutting is always the safe mistake: it only makes a sentence longer.
- Ellipsis: treated like any terminator. "Well... maybe" (lower case next) continues; "Well... Maybe" cuts.
- First fragment: until the first piece is out, the text may also be cut after ``,`` ``;`` ``:``, an em
  or en dash, or a spaced `` - `` followed by whitespace, once the text up to there has at least
  ``first_fragment_words`` words (0 disables). Only the first piece of an answer is cut this way.
- First phrase (adaptive first fragment): with ``first_phrase_words`` > 0, a first sentence that reaches a
  new phrase before any clause mark may also be cut just before a verb or connective that opens its second
  half (is/are/was/were/has/have/and/but/which/who/because/so), once at least ``first_phrase_words`` words
  precede it: "The capital of the United States | is New York City." Synthesis time grows with length, and a
  long first sentence without a comma otherwise waits whole (measured: 10 words ~740 ms vs 6 words ~450 ms).
  A word at the very end of the text so far is not yet a word ("is" may become "island"): it waits.
- Short sentences: a piece shorter than ``min_sentence_chars`` is held and merged with the next piece of
  the same block. Never for the first piece (it goes out at once, whatever its length: the first audio is
  what the user waits for) and never across a hard break (list items like "Eggs" stay separate, so a
  short piece followed by a hard break goes out alone); at the end of the stream it goes out alone.
  Merging on "is the next sentence already available" would make the output depend on the chunking, so
  a short piece always waits for its successor (which costs nothing audible: the previous sentence is
  still playing).
- Whitespace inside a piece is collapsed to single spaces; pieces are never empty.
- ``flush()`` ends the answer and resets the segmenter, ready for the next answer.

Markdown is made speakable by ``voicecli.converse.speakable`` (its docstring lists what it keeps and drops).
"""
from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from enum import Enum

from voicecli.converse.speakable import HARD_BREAK, MarkdownStripper, word_set

__all__ = [
    "Segmenter",
    "asegment_stream",
    "segment_stream",
]

# ---------------------------------------------------------------------------------------------------------
# Sentence splitting
# ---------------------------------------------------------------------------------------------------------

_TERMINATORS = ".!?…"
_CLOSERS = "\"')]}\u201d\u2019\u00bb"  # also closing curly quotes and guillemet
_OPENERS = "\"'([{\u201c\u2018\u00ab\u00bf\u00a1"  # also opening curly quotes, guillemet, inverted ?!
_CURRENCY = "$€£¥₹"
_CUT_CANDIDATE = re.compile(r"[\n.!?…]")
_CUT_CANDIDATE_FIRST = re.compile("[\\n.!?\u2026,;:\u2014\u2013]|(?<=\\s)-")  # \u2014/\u2013: em/en dash
_PHRASE_STARTERS = "is|are|was|were|has|have|and|but|which|who|because|so"
_CUT_CANDIDATE_FIRST_PHRASE = re.compile(
    _CUT_CANDIDATE_FIRST.pattern + rf"|(?P<phrase>\s(?:{_PHRASE_STARTERS}))(?![\w'\u2019])"
)

# Never a sentence end, whatever follows: titles before names, company suffixes, "versus", "et al.".
_ABBREVIATIONS = word_set(
    "mr mrs ms mx dr prof st sr jr vs mt inc ltd corp co fig figs approx cf al capt lt col sgt rev hon gen"
)
# Not a sentence end when a number follows: "No. 5", "p. 12", "Jan. 3".
_BEFORE_NUMBER = word_set(
    "no nos vol vols p pp ch chap sec art para eq ref op ver jan feb mar apr jun jul aug sep sept oct nov dec"
)
_INITIALISM = re.compile(r"[^\W\d_]{1,2}(?:\.[^\W\d_]{1,2})+")  # e.g, i.e, U.S, a.m, Ph.D


class _Verdict(Enum):
    WAIT = "wait"  # cannot decide before more text arrives
    CUT = "cut"
    GO_ON = "go on"


def _plausible_sentence_start(char: str) -> bool:
    return (
        char.isdigit()
        or char in _OPENERS
        or char in _CURRENCY
        or (char.isalpha() and not char.islower())  # upper case, title case, or a script without case
    )


def _is_sentence_end(before: str, terminators: str, following: str) -> bool:
    """Whether a terminator run ends the sentence, given the sentence text before it and the first
    character of what follows (after the closers and whitespace)."""
    if not _plausible_sentence_start(following):
        return False
    if terminators != ".":
        return True  # ! ? and ellipses have no abbreviation ambiguity
    words = before.rsplit(None, 2)
    token = words[-1].lstrip(_OPENERS).rstrip(_CLOSERS) if words else ""
    lowered = token.lower()
    if lowered in _ABBREVIATIONS or _INITIALISM.fullmatch(token):
        return False
    if lowered in _BEFORE_NUMBER and following.isdigit():
        return False
    if len(token) == 1 and token.isupper():
        return False  # an initial: "John F. Kennedy"
    # A list marker inside running text: "Steps: 1. Mix. 2. Bake."
    return not (
        token.isascii() and token.isdigit() and len(token) <= 3 and (len(words) == 1 or words[-2].endswith(":"))
    )


class _SentenceSplitter:
    """Cuts the stripper's plain text into (piece, ended_by_hard_break) pairs, committing each cut as soon
    as it is certain. Scanning resumes where it stopped, so feeding is linear in the text length."""

    def __init__(self, first_fragment_words: int, first_phrase_words: int = 0) -> None:
        self._first_fragment_words = first_fragment_words
        self._first_phrase_words = first_phrase_words
        self._reset()

    def _reset(self) -> None:
        self._buf = ""  # text of the current, unfinished piece (and any undecided text after it)
        self._scan = 0  # where in _buf scanning resumes
        self._produced = 0

    def push(self, text: str, final: bool) -> list[tuple[str, bool]]:
        buf = self._buf + text
        pieces: list[tuple[str, bool]] = []
        start = 0
        index = self._scan
        while True:
            first_fragment = self._first_fragment_words > 0 and self._produced == 0
            pattern = _CUT_CANDIDATE_FIRST if first_fragment else _CUT_CANDIDATE
            if first_fragment and self._first_phrase_words > 0:
                pattern = _CUT_CANDIDATE_FIRST_PHRASE
            found = pattern.search(buf, index)
            if found is None:
                index = len(buf)
                if pattern is _CUT_CANDIDATE_FIRST_PHRASE:  # a phrase starter may be arriving: rescan its space
                    index = max(start, buf.rfind(" ", start), buf.rfind("\t", start))
                break
            index = found.start()
            char = buf[index]
            if found.groupdict().get("phrase"):
                verdict, position = self._at_phrase_start(buf, start, index, found.end(), final)
            elif char == HARD_BREAK:
                self._emit(pieces, buf[start:index], hard=True)
                start = index = index + 1
                continue
            elif char in _TERMINATORS:
                verdict, position = self._at_terminator(buf, start, index, final)
            else:
                verdict, position = self._at_clause_boundary(buf, start, index, final)
            if verdict is _Verdict.WAIT:
                break
            if verdict is _Verdict.CUT:
                self._emit(pieces, buf[start:position], hard=False)
                start = position
            index = position
        if final:
            self._emit(pieces, buf[start:], hard=True)
            self._reset()
        else:
            self._buf = buf[start:]
            self._scan = index - start
        return pieces

    def _emit(self, pieces: list[tuple[str, bool]], text: str, hard: bool) -> None:
        piece = " ".join(text.split())
        if piece:
            pieces.append((piece, hard))
            self._produced += 1

    def _at_terminator(self, buf: str, start: int, index: int, final: bool) -> tuple[_Verdict, int]:
        size = len(buf)
        run_end = index
        while run_end < size and buf[run_end] in _TERMINATORS:
            run_end += 1
        cut = run_end
        while cut < size and buf[cut] in _CLOSERS:
            cut += 1
        if cut == size:
            return (_Verdict.GO_ON, size) if final else (_Verdict.WAIT, index)
        if not buf[cut].isspace() or buf[cut] == HARD_BREAK:
            return _Verdict.GO_ON, cut  # 3.14, example.com, "e.g.," ... or a hard break that cuts anyway
        following = cut
        while following < size and buf[following].isspace() and buf[following] != HARD_BREAK:
            following += 1
        if following == size:
            return (_Verdict.GO_ON, size) if final else (_Verdict.WAIT, index)
        if buf[following] == HARD_BREAK:
            return _Verdict.GO_ON, following
        if _is_sentence_end(buf[start:index], buf[index:run_end], buf[following]):
            return _Verdict.CUT, cut
        return _Verdict.GO_ON, cut

    def _at_phrase_start(self, buf: str, start: int, index: int, end: int, final: bool) -> tuple[_Verdict, int]:
        """`buf[index:end]` is whitespace + a phrase-starting word (see the module docstring)."""
        if end == len(buf) and not final:
            return _Verdict.WAIT, index  # the word may go on
        if len(buf[start:index].split()) >= self._first_phrase_words:
            return _Verdict.CUT, index
        return _Verdict.GO_ON, end

    def _at_clause_boundary(self, buf: str, start: int, index: int, final: bool) -> tuple[_Verdict, int]:
        size = len(buf)
        end = index + 1
        if buf[index] == "-":  # only a spaced hyphen run is a dash; "well-known" never gets here
            while end < size and buf[end] == "-":
                end += 1
        if end == size:
            return (_Verdict.GO_ON, size) if final else (_Verdict.WAIT, index)
        if not buf[end].isspace() or buf[end] == HARD_BREAK:
            return _Verdict.GO_ON, end  # 3,000 / 10:30 / word—word
        if len(buf[start:end].split()) >= self._first_fragment_words:
            return _Verdict.CUT, end
        return _Verdict.GO_ON, end


# ---------------------------------------------------------------------------------------------------------
# Merging short pieces
# ---------------------------------------------------------------------------------------------------------


class _ShortMerger:
    """Holds a piece shorter than min_chars and prepends it to the next piece of the same block, so TTS
    does not get a request per "OK."; never holds the first piece of an answer (see module docstring)."""

    def __init__(self, min_chars: int) -> None:
        self._min_chars = min_chars
        self._pending = ""
        self._emitted = 0

    def add(self, pieces: list[tuple[str, bool]]) -> list[str]:
        out: list[str] = []
        for piece, hard in pieces:
            text = f"{self._pending} {piece}" if self._pending else piece
            if hard or self._emitted == 0 or len(text) >= self._min_chars:
                out.append(text)
                self._pending = ""
                self._emitted += 1
            else:
                self._pending = text
        return out

    def finish(self) -> list[str]:
        out = [self._pending] if self._pending else []
        self._pending = ""
        self._emitted = 0
        return out


# ---------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------


class Segmenter:
    """Streaming LLM text -> speakable sentences, each returned as soon as it is certainly complete.

    One Segmenter handles one answer at a time: ``feed`` every delta, then ``flush`` once at the end of
    the answer (which also resets it for the next one).
    """

    def __init__(
        self, first_fragment_words: int = 6, min_sentence_chars: int = 12, first_phrase_words: int = 0
    ) -> None:
        if first_fragment_words < 0 or min_sentence_chars < 0 or first_phrase_words < 0:
            raise ValueError("first_fragment_words, min_sentence_chars and first_phrase_words must be >= 0")
        self._first_fragment_words = first_fragment_words
        self._min_sentence_chars = min_sentence_chars
        self._first_phrase_words = first_phrase_words
        self._reset()

    def _reset(self) -> None:
        self._stripper = MarkdownStripper()
        self._splitter = _SentenceSplitter(self._first_fragment_words, self._first_phrase_words)
        self._merger = _ShortMerger(self._min_sentence_chars)

    def feed(self, text_delta: str) -> list[str]:
        """The sentences this delta completed (often none)."""
        plain = self._stripper.feed(text_delta)
        if not plain:
            return []
        return self._merger.add(self._splitter.push(plain, final=False))

    def flush(self) -> list[str]:
        """End of the answer: everything still pending, as sentences. Resets the segmenter."""
        plain = self._stripper.flush()
        out = self._merger.add(self._splitter.push(plain, final=True))
        out += self._merger.finish()
        self._reset()
        return out


def segment_stream(deltas: Iterable[str], first_fragment_words: int = 6, min_sentence_chars: int = 12) -> Iterator[str]:
    """Sentences from a stream of text deltas, each yielded as soon as it is complete."""
    segmenter = Segmenter(first_fragment_words, min_sentence_chars)
    for delta in deltas:
        yield from segmenter.feed(delta)
    yield from segmenter.flush()


async def asegment_stream(
    deltas: AsyncIterable[str], first_fragment_words: int = 6, min_sentence_chars: int = 12
) -> AsyncIterator[str]:
    """The async twin of ``segment_stream``, for an async iterable of deltas (a streaming LLM client)."""
    segmenter = Segmenter(first_fragment_words, min_sentence_chars)
    async for delta in deltas:
        for sentence in segmenter.feed(delta):
            yield sentence
    for sentence in segmenter.flush():
        yield sentence
