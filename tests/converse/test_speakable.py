"""Markdown made speakable, as the segmenter delivers it: what is dropped, what is kept, and that a construct
split across deltas is read the same as whole (each case is checked whole and one character at a time)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.converse.test_segmentation import check, chunked, long_runs, markdown_answer, nasty_text, segment
from voicecli.converse.speakable import MarkdownStripper, speakable_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("This is **bold** and *em* and _em_ too.", ["This is bold and em and em too."]),
        ("Call `my_func(x*2)` now.", ["Call my_func(x*2) now."]),
        ("Use ``a `tick` here`` ok.", ["Use a tick here ok."]),
        ("Keep snake_case but drop __dunder__ marks.", ["Keep snake_case but drop dunder marks."]),
        ("~~Old~~ new, about ~5 min.", ["Old new, about ~5 min."]),
        ("***Both*** at once.", ["Both at once."]),
        ("Escaped \\*stars\\* stay.", ["Escaped *stars* stay."]),
    ],
)
def test_inline_markup(text: str, expected: list[str]) -> None:
    check(text, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Title\nSome text.", ["Title", "Some text."]),
        ("### Deep title ###\nText.", ["Deep title ###", "Text."]),
        ("#hashtag is text. C# too.", ["#hashtag is text.", "C# too."]),
        ("Intro:\n- one\n* two\n+ three\n\nAfter.", ["Intro:", "one", "two", "three", "After."]),
        ("  - nested item\n    - deeper item", ["nested item", "deeper item"]),
        ("- item that\n  wraps here", ["item that wraps here"]),
        ("-5 degrees is cold.", ["-5 degrees is cold."]),
        ("> Quoted words.\n> More quote.", ["Quoted words.", "More quote."]),
        ("Above.\n\n---\n\nBelow.", ["Above.", "Below."]),
        ("Title\n=====\nBody.", ["Title", "Body."]),
        ("* * *\nAfter rule.", ["After rule."]),
    ],
)
def test_block_markup(text: str, expected: list[str]) -> None:
    check(text, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Read [the docs](https://x.io/a_b) now.", ["Read the docs now."]),
        ("A [**bold** link](u) here.", ["A bold link here."]),
        ("Logo ![the logo](img.png) here.", ["Logo here."]),
        ("Cite [1] and [2] here.", ["Cite [1] and [2] here."]),
        ("Open <https://x.io/a_b> now.", ["Open https://x.io/a_b now."]),
        ("Line<br>two <b>bold</b>. <div class='x'>Block</div>", ["Line two bold.", "Block"]),
        ("If x < 5 and y<3 then ok.", ["If x < 5 and y<3 then ok."]),
        ("Great job \U0001f389! Next \U0001f44d\U0001f3fd step \u2705.", ["Great job !", "Next step ."]),
        ("Family \U0001f468\u200d\U0001f469\u200d\U0001f467 here.", ["Family here."]),
    ],
)
def test_links_images_html_emoji(text: str, expected: list[str]) -> None:
    check(text, expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Run this:\n```bash\nrm -rf x\n# Not a heading\n```\nDone.", ["Run this:", "Done."]),
        ("Code:\n~~~\nx = 1\n~~~\nDone.", ["Code:", "Done."]),
        ("Short fence:\n````\n```\nstill code\n````\nDone.", ["Short fence:", "Done."]),
        ("Unclosed:\n```\ncode until the end", ["Unclosed:"]),
        ("- step:\n    ```sh\n    make\n    ```\n- next", ["step:", "next"]),
        ("> ```\n> quoted code\n> ```\nDone.", ["Done."]),
    ],
)
def test_fenced_code_is_dropped(text: str, expected: list[str]) -> None:
    check(text, expected)


def test_fence_split_across_deltas_is_still_dropped() -> None:
    deltas = ["Run:\n`", "`", "`py", "thon\nprint('no", "')\n``", "`\nDo", "ne."]
    assert segment(deltas) == ["Run:", "Done."]


def test_bold_markers_split_across_deltas() -> None:
    assert segment(["It is *", "*very", "* bold*", "*. Yes."]) == ["It is very bold.", "Yes."]


def test_link_split_across_deltas() -> None:
    assert segment(["See [th", "e docs](ht", "tps://x", ".io) now."]) == ["See the docs now."]


def test_table_rows_are_read_without_pipes() -> None:
    text = "| Name | Age |\n|:-----|----:|\n| **Ann** | 30 |\n| Bob | |\nAfter."
    check(text, ["Name, Age", "Ann, 30", "Bob", "After."])


def test_speakable_text_is_the_whole_answer_on_one_line() -> None:
    assert speakable_text("# Hi\n\n**Bold** [x](y)\n```\ncode\n```\n") == "Hi Bold x"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(nasty_text, markdown_answer, long_runs), data=st.data())
def test_each_delta_releases_what_the_text_so_far_decides(text: str, data: st.DataObject) -> None:
    """Text that waits (an undecided run, a line waiting for its end, a long delta taken a window at a time) is
    released the moment the text so far decides it, exactly as if the text so far had come whole."""
    stripper = MarkdownStripper()
    out = ""
    seen = ""
    for delta in data.draw(chunked(text)):
        out += stripper.feed(delta)
        seen += delta
        assert out == MarkdownStripper().feed(seen)
    whole = MarkdownStripper()
    assert out + stripper.flush() == whole.feed(text) + whole.flush()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("#" * 3000 + " not a heading", "#" * 3000 + " not a heading"),
        (" " * 3000 + "### Title", "\n Title"),
        ("- " * 1500 + "x", "\n" + " -" * 1499 + " x"),
        ("`" * 2000 + "\ncode to the end", "\n"),
        ("a" + "`" * 2000 + "b", "ab"),
        ("a" + "_" * 2000 + "b", "a" + "_" * 2000 + "b"),
        ("| " + "[x](u) | " * 600 + "\nafter", "\n" + ", ".join(["x"] * 600) + "\nafter"),
    ],
)
def test_long_constructs_fed_whole_or_in_pieces(text: str, expected: str) -> None:
    """Constructs far longer than the stripper's window, and undecided for most of their length."""
    for size in (1, 4, 999, len(text)):
        stripper = MarkdownStripper()
        got = "".join(stripper.feed(text[i : i + size]) for i in range(0, len(text), size)) + stripper.flush()
        assert got == expected, size
