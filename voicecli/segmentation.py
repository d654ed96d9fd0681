"""Streaming sentence segmentation: LLM text deltas in, speakable sentences out.

WHY: time to first audio is dominated by how long we wait before the first TTS request. Waiting for the
whole answer (or for a regex over the whole answer) throws away everything streaming buys us, so each
sentence leaves here the moment it is *certainly* complete, and the first one may leave even earlier, at a
clause boundary.

The pipeline has three stages, each a deterministic function of the text seen so far that commits a
decision only when no later text can change it. That is what makes the output independent of how the
LLM happens to chunk its deltas (the property tests check exactly this):

1. ``MarkdownStripper`` turns markdown into speakable plain text. It marks *hard breaks* (paragraph
   breaks, list items, headings, table rows, code blocks, rules) with ``"\\n"``; a soft line wrap inside a
   paragraph or list item becomes a space. It holds back only constructs it cannot decide yet (an opened
   ``[`` that may become a link, a ``<`` that may become an HTML tag, a line start that may become a
   fence, ...), and every such construct is bounded (one line, a few hundred characters).
2. ``_SentenceSplitter`` cuts the plain text into sentences (and cuts the first one early, see below).
3. ``_ShortMerger`` merges tiny sentences into the following one.

Decisions (pinned by tests/test_segmentation.py):

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
- Markdown: ``*`` is always dropped (emphasis, bullets; a spaced multiplication sign is lost too),
  backticks are dropped and inline code keeps its text verbatim, ``_`` runs are dropped unless they sit
  between two letters/digits (snake_case stays), ``~~`` is dropped, a single ``~`` kept. Headings,
  bullets (``-``/``*``/``+``), numbered markers (``1.``/``1)``) and quote markers (``>``) at line start are
  dropped; headings, items and table rows are their own sentences. Links keep their text, images are
  dropped, ``<https://...>`` autolinks keep the URL, HTML tags are dropped (inline ones like ``<b>``
  vanish, others like ``<br>`` leave a space between words). Bare URLs are kept verbatim
  (``_``/``~`` inside are not treated as markdown): speaking only the domain would lose information, and
  turning URLs into words is a pronunciation concern for a later stage. Fenced code blocks (``` or ~~~,
  any indentation, also inside quotes) are dropped entirely, up to the matching closing fence or the end
  of the answer. Table rows are read with their cells joined by ", " (the header too); separator rows are
  dropped. Horizontal rules and setext underlines (a line of 3+ ``-``/``*``/``_``/``=``) are dropped.
  A backslash before ASCII punctuation is dropped (the punctuation is kept literally). Emoji (pictographs,
  dingbats, flags, skin tones) become a space, joiners and variation selectors vanish: TTS voices read them
  badly or not at all.
- Whitespace inside a piece is collapsed to single spaces; pieces are never empty.
- ``flush()`` ends the answer and resets the segmenter, ready for the next answer.

Known limits (on purpose, for simplicity): indented (4-space) code blocks, HTML comments, reference-style
links and link titles are read as text; an inline code span ends at its line; a ``|`` that does not start
a line is kept; a ``<`` followed by a letter holds the rest of its line back (up to 300 characters) until
it is known not to be an HTML tag.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from enum import Enum

__all__ = [
    "MarkdownStripper",
    "Segmenter",
    "asegment_stream",
    "segment_stream",
    "speakable_text",
]

HARD_BREAK = "\n"
"""How the stripper marks a hard break in its output; every other kind of whitespace is soft."""

# ---------------------------------------------------------------------------------------------------------
# Markdown stripping
# ---------------------------------------------------------------------------------------------------------


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_EMOJI_RANGES = (
    "\u2300-\u23ff"  # misc technical: watches, hourglasses, media controls
    "\u2600-\u27bf"  # misc symbols and dingbats
    "\u2b00-\u2bff"  # arrows and stars used as emoji
    "\U0001f000-\U0001faff"  # pictographs, emoticons, transport, flags, skin tones, supplemental symbols
    "\U000e0000-\U000e007f"  # tag characters (subdivision flags)
)
_EMOJI = re.compile(f"[{_EMOJI_RANGES}]")
_JOINERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
# Where the plain-text fast path must stop: markup characters, emoji, and the start of a word beginning with
# h/w (a possible bare URL, whose underscores must not be read as emphasis).
_SPECIAL = re.compile(f"[\\n*`_~\\[!<\\\\\u200d\ufe0e\ufe0f\u20e3{_EMOJI_RANGES}]|(?<![^\\W_])[hw]")
_CODE_STOP = re.compile(r"[`\n]")
_URL_STOP = re.compile(r"[\s<>*`\[\]]")
_URL_PREFIXES = ("https://", "http://", "www.")

# Every inline construct is bounded, so holding text back while it may still become one is bounded too.
_LINK_BODY = r"\[([^\[\]\n]{0,200})\]\(([^\s()]{0,500})\)"
_LINK_BODY_PREFIX = r"\[[^\[\]\n]{0,200}(?:\](?:\([^\s()]{0,500})?)?"
_LINK = re.compile(_LINK_BODY)
_LINK_PREFIX = re.compile(_LINK_BODY_PREFIX)
_IMAGE = re.compile("!" + _LINK_BODY)
_IMAGE_PREFIX = re.compile("!" + _LINK_BODY_PREFIX)
_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]{0,30})(?:[ \t][^<>\n]{0,300})?/?>")
# Tags that format text inside a line vanish; any other tag (<br>, <p>, <div>, ...) separates words.
_INLINE_TAGS = _word_set(
    "a abbr b bdi bdo cite code del dfn em i ins kbd mark q s samp small span strong sub sup u var"
)
_TAG_PREFIX = re.compile(r"</?(?:[A-Za-z][A-Za-z0-9-]{0,30}(?:[ \t][^<>\n]{0,300})?/?)?")
_AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^\s<>]{1,500}|[^\s<>@:/]{1,64}@[^\s<>@]{1,255})>")
# A superset of the autolink prefixes (any short scheme): over-approximating only delays the decision.
_AUTOLINK_PREFIX = re.compile(r"<(?:[a-z]{0,6}(?::[^\s<>]{0,500})?|[^\s<>@:/]{0,64}(?:@[^\s<>@]{0,255})?)")

_RULE_PREFIX = re.compile(r"([-*_=])(?:[ \t]*\1)*[ \t]*")
_TABLE_SEPARATOR_CELL = re.compile(r":?-+:?")
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_DIGITS = "0123456789"


def _run_length(text: str, start: int) -> int:
    """How many times text[start] repeats from start on (markdown cares about run lengths: ``` vs `)."""
    char = text[start]
    end = start
    while end < len(text) and text[end] == char:
        end += 1
    return end - start


def _closes_fence(line: str, fence: tuple[str, int]) -> bool:
    """A closing fence: only fence characters (at least as many as the opener), quote markers allowed."""
    stripped = line.strip()
    while stripped.startswith(">"):
        stripped = stripped[1:].strip()
    char, length = fence
    return len(stripped) >= length and stripped == char * len(stripped)


def _table_row_text(line: str) -> str | None:
    """A table row as speakable text (cells joined by ", "), or None for a separator row."""
    row = line.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|"):
        row = row[:-1]
    cells = [cell.strip() for cell in row.split("|")]
    if all(_TABLE_SEPARATOR_CELL.fullmatch(cell) for cell in cells):
        return None
    return ", ".join(cell for cell in cells if cell)


class MarkdownStripper:
    """Incremental markdown -> speakable text, with hard breaks marked as ``HARD_BREAK``.

    ``feed`` returns the text that is decided so far; ``flush`` resolves what is still pending as if the
    input ended there, and resets. The concatenation of all outputs does not depend on how the input was
    split into deltas.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._buf = ""  # raw input not consumed yet
        self._fence: tuple[str, int] | None = None  # inside a fenced code block: (fence char, run length)
        self._skip_line = False  # dropping the rest of a fence opener line (its info string)
        self._begin_line()

    def _begin_line(self) -> None:
        self._line_start = True  # the line's block kind is not decided yet
        self._hard_line = False  # the current line ends with a hard break (heading, table row)
        self._code = 0  # inside an inline code span opened by this many backticks
        self._url = False  # inside a bare URL, copied verbatim
        self._prev = ""  # last raw character consumed on this line

    def feed(self, delta: str) -> str:
        """Consume a delta; return the speakable text that no later input can change."""
        self._buf += delta
        return self._run(final=False)

    def flush(self) -> str:
        """End of input: return everything still pending, then reset for the next answer."""
        text = self._run(final=True)
        self._reset()
        return text

    def _run(self, final: bool) -> str:
        out: list[str] = []
        pos = 0
        while pos < len(self._buf):
            step = self._step(pos, final, out)
            if step is None:
                break
            pos = step
        self._buf = self._buf[pos:]
        return "".join(out)

    def _step(self, pos: int, final: bool, out: list[str]) -> int | None:
        """Consume something at pos; return the new position (in self._buf, which a splice may have
        replaced), or None when what follows pos cannot be decided before more input arrives."""
        if self._skip_line:
            newline = self._buf.find("\n", pos)
            if newline < 0:
                return len(self._buf)
            self._skip_line = False
            self._begin_line()
            return newline + 1
        if self._line_start:
            return self._line_start_step(pos, final, out)
        if self._code:
            return self._code_step(pos, final, out)
        if self._url:
            return self._url_step(pos, out)
        return self._inline_step(pos, final, out)

    def _line_start_step(self, pos: int, final: bool, out: list[str]) -> int | None:
        buf = self._buf
        newline = buf.find("\n", pos)
        complete = newline >= 0 or final
        end = newline if newline >= 0 else len(buf)
        after = end + 1 if newline >= 0 else end
        line = buf[pos:end]
        if self._fence is not None:
            if not complete:
                return None
            if _closes_fence(line, self._fence):
                self._fence = None
                out.append(HARD_BREAK)
            return after
        body = line.lstrip()
        if not body:
            if not complete:
                return None
            out.append(HARD_BREAK)  # blank line: paragraph break
            return after
        marker = pos + len(line) - len(body)  # where the line's first non-blank character is
        first = body[0]
        if first == ">":  # quote marker: drop it and classify the rest of the line afresh
            return marker + 1
        if first in "`~":
            run = _run_length(body, 0)
            if run == len(body) and not complete:
                return None
            if run >= 3:
                self._fence = (first, run)
                self._skip_line = True
                out.append(HARD_BREAK)
                return marker + run
        elif first == "#":
            run = _run_length(body, 0)
            if run == len(body) and not complete:
                return None
            if run <= 6 and (run == len(body) or body[run] in " \t"):
                out.append(HARD_BREAK)
                self._line_start = False
                self._hard_line = True
                return marker + run
        elif first == "|":
            if not complete:
                return None
            row = _table_row_text(line)
            out.append(HARD_BREAK)
            if row is None:
                return after
            self._buf = row + buf[end:]  # the row text still goes through inline markdown stripping
            self._line_start = False
            self._hard_line = True
            return 0
        elif first in _DIGITS:
            digits = len(body) - len(body.lstrip(_DIGITS))
            if digits == len(body) and not complete:
                return None
            if digits <= 9 and digits < len(body) and body[digits] in ".)":
                if digits + 1 == len(body) and not complete:
                    return None
                if digits + 1 == len(body) or body[digits + 1] in " \t":
                    out.append(HARD_BREAK)
                    self._line_start = False
                    return marker + digits + 1
        else:
            if first in "-*_=" and _RULE_PREFIX.fullmatch(body):
                if not complete:
                    return None  # "- " may still become a bullet or a rule
                if body.count(first) >= 3:
                    out.append(HARD_BREAK)
                    return after
            if first in "-*+":
                if len(body) == 1 and not complete:
                    return None
                if len(body) == 1 or body[1] in " \t":
                    out.append(HARD_BREAK)
                    self._line_start = False
                    return marker + 1
        self._line_start = False  # an ordinary paragraph line; a soft wrap joins it to the previous one
        return pos

    def _code_step(self, pos: int, final: bool, out: list[str]) -> int | None:
        buf = self._buf
        found = _CODE_STOP.search(buf, pos)
        stop = found.start() if found else len(buf)
        if stop > pos:
            out.append(buf[pos:stop])  # inline code is read verbatim
            self._prev = buf[stop - 1]
            return stop
        if buf[pos] == "\n":  # a code span ends with its line
            self._code = 0
            return pos
        run = _run_length(buf, pos)
        if pos + run == len(buf) and not final:
            return None
        if run == self._code:
            self._code = 0
        self._prev = "`"
        return pos + run

    def _url_step(self, pos: int, out: list[str]) -> int:
        buf = self._buf
        found = _URL_STOP.search(buf, pos)
        stop = found.start() if found else len(buf)
        if stop > pos:
            out.append(buf[pos:stop])
            self._prev = buf[stop - 1]
        if found:
            self._url = False
        return stop

    def _inline_step(self, pos: int, final: bool, out: list[str]) -> int | None:
        buf = self._buf
        found = _SPECIAL.search(buf, pos)
        stop = found.start() if found else len(buf)
        if stop > pos:
            out.append(buf[pos:stop])
            self._prev = buf[stop - 1]
            return stop
        char = buf[pos]
        if char == "\n":
            out.append(HARD_BREAK if self._hard_line else " ")
            self._begin_line()
            return pos + 1
        if char in "`_~":
            run = _run_length(buf, pos)
            end = pos + run
            if end == len(buf) and not final:
                return None
            if char == "`":
                self._code = run
            elif char == "_":
                following = buf[end] if end < len(buf) else ""
                if self._prev.isalnum() and following.isalnum():
                    out.append(buf[pos:end])  # intraword underscore: snake_case
            elif run == 1:
                out.append(char)
            self._prev = char
            return end
        if char == "[":
            link = _LINK.match(buf, pos)
            if link:
                self._buf = link.group(1) + buf[link.end() :]  # the link text may hold markup itself
                return 0
            if not final and _LINK_PREFIX.fullmatch(buf, pos):
                return None
        elif char == "!":
            if pos + 1 == len(buf) and not final:
                return None
            if buf.startswith("[", pos + 1):
                image = _IMAGE.match(buf, pos)
                if image:
                    self._prev = ")"
                    return image.end()
                if not final and _IMAGE_PREFIX.fullmatch(buf, pos):
                    return None
        elif char == "<":
            tag = _TAG.match(buf, pos)
            if tag:
                if tag.group(1).lower() not in _INLINE_TAGS:
                    out.append(" ")
                self._prev = ">"
                return tag.end()
            autolink = _AUTOLINK.match(buf, pos)
            if autolink:
                out.append(autolink.group(1))
                self._prev = ">"
                return autolink.end()
            if not final and (_TAG_PREFIX.fullmatch(buf, pos) or _AUTOLINK_PREFIX.fullmatch(buf, pos)):
                return None
        elif char == "\\":
            if pos + 1 == len(buf) and not final:
                return None
            if pos + 1 < len(buf) and buf[pos + 1] in _ASCII_PUNCTUATION:
                out.append(buf[pos + 1])
                self._prev = buf[pos + 1]
                return pos + 2
        elif char in "hw":
            if not self._prev.isalnum():
                for prefix in _URL_PREFIXES:
                    if buf.startswith(prefix, pos):
                        out.append(prefix)
                        self._prev = prefix[-1]
                        self._url = True
                        return pos + len(prefix)
                tail = buf[pos : pos + 8]  # the buffer ends inside what may still become a URL prefix
                if not final and any(prefix.startswith(tail) for prefix in _URL_PREFIXES):
                    return None
        elif char == "*" or char in _JOINERS:
            self._prev = char
            return pos + 1
        elif _EMOJI.match(char):
            out.append(" ")
            self._prev = char
            return pos + 1
        out.append(char)  # an ordinary character after all
        self._prev = char
        return pos + 1


def speakable_text(markdown: str) -> str:
    """The whole answer as one speakable line: what the segments, joined by spaces, add up to."""
    stripper = MarkdownStripper()
    text = stripper.feed(markdown) + stripper.flush()
    return " ".join(text.split())


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
_ABBREVIATIONS = _word_set(
    "mr mrs ms mx dr prof st sr jr vs mt inc ltd corp co fig figs approx cf al capt lt col sgt rev hon gen"
)
# Not a sentence end when a number follows: "No. 5", "p. 12", "Jan. 3".
_BEFORE_NUMBER = _word_set(
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
