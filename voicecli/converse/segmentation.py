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

import itertools
import re
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
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
_PHRASE_STARTER_CHARS = max(len(word) for word in _PHRASE_STARTERS.split("|"))
_NEAR_WORDS = 64  # characters before a terminator that usually hold the two words its verdict looks at

# The runs a candidate's verdict scans forward over. While a run reaches the end of the text so far, the verdict
# waits; the matching pattern below says which input leaves it waiting (see _SentenceSplitter._hold).
_TERMINATOR_RUN = re.compile(f"[{re.escape(_TERMINATORS)}]*")
_CLOSER_RUN = re.compile(f"[{re.escape(_CLOSERS)}]*")
_SPACE_RUN = re.compile(r"[^\S\n]*")  # whitespace, but not a hard break
_HYPHEN_RUN = re.compile("-*")
_AFTER_TERMINATOR = re.compile(_TERMINATOR_RUN.pattern + _CLOSER_RUN.pattern + _SPACE_RUN.pattern)
_AFTER_CLOSER = re.compile(_CLOSER_RUN.pattern + _SPACE_RUN.pattern)

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


def _is_sentence_end(last_words: Callable[[], tuple[str, str]], terminators: str, following: str) -> bool:
    """Whether a terminator run ends the sentence, given the first character of what follows (after the closers
    and whitespace) and, asked only when needed, the last word of the sentence before the run and the last
    character of the word before that ("" when there is none)."""
    if not _plausible_sentence_start(following):
        return False
    if terminators != ".":
        return True  # ! ? and ellipses have no abbreviation ambiguity
    word, previous_end = last_words()
    token = word.lstrip(_OPENERS).rstrip(_CLOSERS)
    lowered = token.lower()
    if lowered in _ABBREVIATIONS or _INITIALISM.fullmatch(token):
        return False
    if lowered in _BEFORE_NUMBER and following.isdigit():
        return False
    if len(token) == 1 and token.isupper():
        return False  # an initial: "John F. Kennedy"
    # A list marker inside running text: "Steps: 1. Mix. 2. Bake."
    return not (token.isascii() and token.isdigit() and len(token) <= 3 and previous_end in ("", ":"))


def _end_of(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where ``pattern`` (a run, which also matches nothing) stops matching text from start on."""
    found = pattern.match(text, start)
    assert found is not None  # a run matches the empty string
    return found.end()


def _backwards(parts: Iterable[tuple[str, int, int]]) -> Iterator[str]:
    """The characters of text[lo:hi] for each (text, lo, hi) in turn, each read from its end."""
    for text, lo, hi in parts:
        for index in range(hi - 1, lo - 1, -1):
            yield text[index]


class _SentenceSplitter:
    """Cuts the stripper's plain text into (piece, ended_by_hard_break) pairs, committing each cut as soon
    as it is certain.

    Feeding is linear in the text length, however the text is chunked: scanning resumes where it stopped; the
    scanned part of the current piece moves to ``_head`` so a long piece is not copied again with every push; and a
    verdict that waits for a run to end (``Hi.`` and spaces so far) is not re-run for input that only extends the
    run (``_hold``).
    """

    def __init__(self, first_fragment_words: int, first_phrase_words: int = 0) -> None:
        self._first_fragment_words = first_fragment_words
        self._first_phrase_words = first_phrase_words
        self._reset()

    def _reset(self) -> None:
        self._clear_head()
        self._buf = ""  # the text after the head: the rest of the current piece and any undecided text after it
        self._scan = 0  # where in _buf scanning resumes
        # When the verdict on the candidate at _scan waits for a run to end (terminators, closers, whitespace,
        # hyphens), _hold matches the input that would only extend the run: that input is set aside in _held.
        self._hold: re.Pattern[str] | None = None
        self._held: list[str] = []
        self._produced = 0

    def push(self, text: str, final: bool) -> list[tuple[str, bool]]:
        if self._hold is not None and not final and self._hold.fullmatch(text):
            self._held.append(text)
            if text and text[-1] in _CLOSERS:  # the run has moved on: closers, then whitespace only
                self._hold = _AFTER_CLOSER
            elif text and text[-1].isspace():
                self._hold = _SPACE_RUN
            return []
        buf = "".join([self._buf, *self._held, text])
        self._held.clear()
        self._hold = None
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
                if pattern is _CUT_CANDIDATE_FIRST_PHRASE:
                    # A phrase starter may be arriving: rescan the tail that can hold its space and a partial word
                    # (one further back would have matched already, its end being known).
                    index = max(index, len(buf) - _PHRASE_STARTER_CHARS)
                else:
                    index = len(buf)
                break
            index = found.start()
            char = buf[index]
            if found.groupdict().get("phrase"):
                verdict, position = self._at_phrase_start(buf, start, index, found.end(), final)
            elif char == HARD_BREAK:
                self._emit(pieces, buf, start, index, hard=True)
                start = index = index + 1
                continue
            elif char in _TERMINATORS:
                verdict, position = self._at_terminator(buf, start, index, final)
            else:
                verdict, position = self._at_clause_boundary(buf, start, index, final)
            if verdict is _Verdict.WAIT:
                break
            if verdict is _Verdict.CUT:
                self._emit(pieces, buf, start, position, hard=False)
                start = position
            index = position
        if final:
            self._emit(pieces, buf, start, len(buf), hard=True)
            self._reset()
        else:
            # Keep the character before the resume point: the dash candidate looks behind itself for a space.
            keep = max(start, index - 1)
            self._add_to_head(buf[start:keep])
            self._buf = buf[keep:]
            self._scan = index - keep
        return pieces

    def _clear_head(self) -> None:
        self._head: list[str] = []  # the current piece's text before _buf, already scanned
        self._head_words = 0  # words in the head
        self._head_open = False  # the head ends inside a word
        self._head_length = 0
        self._head_tail = ""  # the head's last _NEAR_WORDS characters

    def _add_to_head(self, text: str) -> None:
        if not text:
            return
        words = len(text.split())
        if self._head_open and not text[0].isspace():
            words -= 1  # the head's last word goes on
        self._head.append(text)
        self._head_words += words
        self._head_open = not text[-1].isspace()
        self._head_length += len(text)
        self._head_tail = (self._head_tail + text[-_NEAR_WORDS:])[-_NEAR_WORDS:]

    def _emit(self, pieces: list[tuple[str, bool]], buf: str, start: int, end: int, hard: bool) -> None:
        text = buf[start:end]
        if self._head:  # the piece began in the head (so start is 0)
            text = "".join([*self._head, text])
            self._clear_head()
        piece = " ".join(text.split())
        if piece:
            pieces.append((piece, hard))
            self._produced += 1

    def _words(self, buf: str, start: int, end: int) -> int:
        """How many words the current piece has up to buf[end] (only the first fragment asks, a few times)."""
        words = len(buf[start:end].split())
        if self._head:
            words += self._head_words
            if self._head_open and end > start and not buf[start].isspace():
                words -= 1
        return words

    def _last_words(self, buf: str, start: int, index: int) -> tuple[str, str]:
        """The piece's last word before buf[index], and the last character of the word before it ("" if none).

        Read backwards, from buf into the head: each word is read at most twice over a whole answer."""
        near = max(start, index - _NEAR_WORDS)
        text = buf[near:index]
        whole = near == start  # text holds the whole piece
        if whole and self._head:
            text = self._head_tail + text
            whole = self._head_length <= _NEAR_WORDS
        words = text.rsplit(None, 2)
        if len(words) == 3 or whole:  # the usual case: both words are near
            return (words[-1] if words else ""), (words[-2][-1] if len(words) > 1 else "")
        head = ((part, 0, len(part)) for part in reversed(self._head))
        chars = _backwards(itertools.chain([(buf, start, index)], head))
        word: list[str] = []
        for char in chars:  # whitespace after the last word, then the word
            if not char.isspace():
                word.append(char)
                break
        for char in chars:
            if char.isspace():
                break
            word.append(char)
        last = "".join(reversed(word))
        for char in chars:  # whitespace before the last word, then the end of the word before it
            if not char.isspace():
                return last, char
        return last, ""

    def _at_terminator(self, buf: str, start: int, index: int, final: bool) -> tuple[_Verdict, int]:
        size = len(buf)
        run_end = _end_of(_TERMINATOR_RUN, buf, index)
        cut = _end_of(_CLOSER_RUN, buf, run_end)
        if cut == size:
            if final:
                return _Verdict.GO_ON, size
            self._hold = _AFTER_TERMINATOR if run_end == size else _AFTER_CLOSER
            return _Verdict.WAIT, index
        if not buf[cut].isspace() or buf[cut] == HARD_BREAK:
            return _Verdict.GO_ON, cut  # 3.14, example.com, "e.g.," ... or a hard break that cuts anyway
        following = _end_of(_SPACE_RUN, buf, cut)
        if following == size:
            if final:
                return _Verdict.GO_ON, size
            self._hold = _SPACE_RUN
            return _Verdict.WAIT, index
        if buf[following] == HARD_BREAK:
            return _Verdict.GO_ON, following
        if _is_sentence_end(lambda: self._last_words(buf, start, index), buf[index:run_end], buf[following]):
            return _Verdict.CUT, cut
        return _Verdict.GO_ON, cut

    def _at_phrase_start(self, buf: str, start: int, index: int, end: int, final: bool) -> tuple[_Verdict, int]:
        """`buf[index:end]` is whitespace + a phrase-starting word (see the module docstring)."""
        if end == len(buf) and not final:
            return _Verdict.WAIT, index  # the word may go on
        if self._words(buf, start, index) >= self._first_phrase_words:
            return _Verdict.CUT, index
        return _Verdict.GO_ON, end

    def _at_clause_boundary(self, buf: str, start: int, index: int, final: bool) -> tuple[_Verdict, int]:
        size = len(buf)
        end = index + 1
        if buf[index] == "-":  # only a spaced hyphen run is a dash; "well-known" never gets here
            end = _end_of(_HYPHEN_RUN, buf, end)
        if end == size:
            if final:
                return _Verdict.GO_ON, size
            if buf[index] == "-":
                self._hold = _HYPHEN_RUN
            return _Verdict.WAIT, index
        if not buf[end].isspace() or buf[end] == HARD_BREAK:
            return _Verdict.GO_ON, end  # 3,000 / 10:30 / word—word
        if self._words(buf, start, end) >= self._first_fragment_words:
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
