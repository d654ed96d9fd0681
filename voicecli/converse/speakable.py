"""Markdown -> speakable plain text, streaming: LLM answers are markdown, and a voice must not read ``**`` aloud.

``MarkdownStripper`` turns markdown into speakable plain text as it streams. It marks *hard breaks* (paragraph
breaks, list items, headings, table rows, code blocks, rules) with ``"\\n"``, which the segmenter
(voicecli.converse.segmentation) always cuts at; a soft line wrap inside a paragraph or list item becomes a space. It
holds back only constructs it cannot decide yet (an opened ``[`` that may become a link, a ``<`` that may become an HTML
tag, a line start that may become a fence, ...), and every such construct is bounded (one line, a few hundred
characters), so the output does not depend on how the LLM chunks its deltas.

Decisions (pinned by tests/converse/test_speakable.py):

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

Known limits (on purpose, for simplicity): indented (4-space) code blocks, HTML comments, reference-style
links and link titles are read as text; an inline code span ends at its line; a ``|`` that does not start
a line is kept; a ``<`` followed by a letter holds the rest of its line back (up to 300 characters) until
it is known not to be an HTML tag.

Cost: linear in the answer's length however it is chunked (an LLM may send thousands of ``#`` or a line that never
ends): a construct still undecided at the end of the input is not re-examined for input that cannot decide it (see
``MarkdownStripper._hold``), and the steps look at the input a bounded window at a time.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["HARD_BREAK", "MarkdownStripper", "speakable_text", "word_set"]

HARD_BREAK = "\n"
"""How the stripper marks a hard break in its output; every other kind of whitespace is soft."""

def word_set(words: str) -> frozenset[str]:
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
_INLINE_TAGS = word_set(
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
_DIGIT_RUN = re.compile("[0-9]*")
_BLANKS = re.compile(r"[^\S\n]*")  # whitespace within a line: what ``line.lstrip()`` drops
_RUNS = {char: re.compile(f"{re.escape(char)}*") for char in "#`_~"}

# What may follow a construct that is still undecided without deciding it (MarkdownStripper._hold): more of a line that
# waits for its end, more of a run, more of a rule that may still become a bullet.
_REST_OF_LINE = re.compile(r"[^\n]*")
_RULE_CONTINUATIONS = {char: re.compile(f"[{re.escape(char)} \t]*") for char in "-*_="}

_WINDOW = 1024
"""The most new input the steps take in at once. A splice (a link's text, a table row) copies what follows it in the
working buffer, so a bounded buffer keeps a long delta full of links linear."""


def _end_of(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where ``pattern`` stops matching text from start on; the caller knows it matches there (a run ``x*`` does
    everywhere)."""
    found = pattern.match(text, start)
    assert found is not None
    return found.end()


def _run_length(text: str, start: int) -> int:
    """How many times text[start] (one of ``#`_~``) repeats from start on (markdown cares about run lengths)."""
    return _end_of(_RUNS[text[start]], text, start) - start


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
        self._buf = ""  # raw input the steps work on; it starts at the first undecided character
        self._queue: deque[tuple[str, int]] = deque()  # input not in _buf yet: (text, how much of it was taken)
        # A step that waits (returns None) may set _hold: a pattern matching input that would leave it undecided
        # (more of a run, more of a line that waits for its end). Such input is set aside in _held without running
        # the step again, which keeps a long undecided construct linear instead of quadratic.
        self._hold: re.Pattern[str] | None = None
        self._held: list[str] = []
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
        if delta:
            self._queue.append((delta, 0))
        return self._run(final=False)

    def flush(self) -> str:
        """End of input: return everything still pending, then reset for the next answer."""
        text = self._run(final=True)
        self._reset()
        return text

    def _run(self, final: bool) -> str:
        out: list[str] = []
        while True:
            fresh = self._take_input()
            if not fresh:
                if not final:
                    return "".join(out)
                self._buf = "".join([self._buf, *self._held])  # the end decides what waited
                self._held.clear()
            last = final and not self._queue
            self._hold = None
            pos = 0
            while pos < len(self._buf):
                step = self._step(pos, last, out)
                if step is None:
                    break
                pos = step
            self._buf = self._buf[pos:]
            if final and not self._queue:  # the queue may have grown: a table row goes back into it
                return "".join(out)

    def _take_input(self) -> bool:
        """Move the next window of queued input into the working buffer; False when none is left that could
        change anything (input that matches the waiting step's _hold goes to _held instead)."""
        while self._queue:
            text, taken = self._queue[0]
            if len(text) - taken <= _WINDOW:
                self._queue.popleft()
                window = text[taken:] if taken else text
            else:
                self._queue[0] = (text, taken + _WINDOW)
                window = text[taken : taken + _WINDOW]
            if self._hold is not None and self._hold.fullmatch(window):
                self._held.append(window)
                continue
            self._buf = "".join([self._buf, *self._held, window])
            self._held.clear()
            return True
        return False

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
        """Classify the line starting at pos, looking no further than its first constructs need (a quote marker
        is consumed alone, so a line of many ``>`` costs no more than its length)."""
        buf = self._buf
        if self._fence is not None:
            newline = buf.find("\n", pos)
            if newline < 0 and not final:
                self._hold = _REST_OF_LINE
                return None
            end = newline if newline >= 0 else len(buf)
            if _closes_fence(buf[pos:end], self._fence):
                self._fence = None
                out.append(HARD_BREAK)
            return end + 1 if newline >= 0 else end
        marker = _end_of(_BLANKS, buf, pos)  # where the line's first non-blank character is
        if marker == len(buf) or buf[marker] == "\n":  # a blank line (so far)
            if marker == len(buf):
                if not final:
                    self._hold = _BLANKS
                    return None
                out.append(HARD_BREAK)
                return marker
            out.append(HARD_BREAK)  # blank line: paragraph break
            return marker + 1
        first = buf[marker]
        if first == ">":  # quote marker: drop it and classify the rest of the line afresh
            return marker + 1
        if first in "`~":
            run = _run_length(buf, marker)
            if marker + run == len(buf) and not final:
                self._hold = _RUNS[first]
                return None
            if run >= 3:
                self._fence = (first, run)
                self._skip_line = True
                out.append(HARD_BREAK)
                return marker + run
        elif first == "#":
            run = _run_length(buf, marker)
            end = marker + run
            if end == len(buf) and not final:
                self._hold = _RUNS[first]
                return None
            if run <= 6 and (end == len(buf) or buf[end] in " \t\n"):
                out.append(HARD_BREAK)
                self._line_start = False
                self._hard_line = True
                return end
        elif first == "|":
            newline = buf.find("\n", marker)
            if newline < 0 and not final:
                self._hold = _REST_OF_LINE
                return None
            end = newline if newline >= 0 else len(buf)
            row = _table_row_text(buf[pos:end])
            out.append(HARD_BREAK)
            if row is None:
                return end + 1 if newline >= 0 else end
            # The row text still goes through inline markdown stripping, ahead of the rest of the input. It goes back
            # into the queue rather than into the buffer: a long row full of links then splices within a window.
            for text in (buf[end:], row):
                if text:
                    self._queue.appendleft((text, 0))
            self._buf = ""
            self._line_start = False
            self._hard_line = True
            return 0
        elif first in _DIGITS:
            end = _end_of(_DIGIT_RUN, buf, marker)
            if end == len(buf) and not final:
                self._hold = _DIGIT_RUN
                return None
            if end - marker <= 9 and end < len(buf) and buf[end] in ".)":
                if end + 1 == len(buf) and not final:
                    return None
                if end + 1 == len(buf) or buf[end + 1] in " \t\n":
                    out.append(HARD_BREAK)
                    self._line_start = False
                    return end + 1
        else:
            if first in "-*_=":
                end = _end_of(_RULE_PREFIX, buf, marker)
                if end == len(buf) or buf[end] == "\n":  # the whole line is a rule so far
                    if end == len(buf) and not final:
                        self._hold = _RULE_CONTINUATIONS[first]  # "- " may still become a bullet or a rule
                        return None
                    if buf.count(first, marker, end) >= 3:
                        out.append(HARD_BREAK)
                        return end + 1 if end < len(buf) else end
            if first in "-*+":
                if marker + 1 == len(buf) and not final:
                    return None
                if marker + 1 == len(buf) or buf[marker + 1] in " \t\n":
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
            self._hold = _RUNS["`"]
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
                self._hold = _RUNS[char]
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
