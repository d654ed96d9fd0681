"""What was heard of an answer at a play position: by the endpoint's word times, or by the played fraction."""

from __future__ import annotations

from voicecli.converse.heard import (
    SentencePlay,
    current_word,
    cut_at,
    heard_by_fraction,
    heard_by_timings,
    locate,
)
from voicecli.wire.protocol import WordTiming

WORDS = (WordTiming("It", 0, 200), WordTiming("has", 200, 450), WordTiming("no", 450, 600),
         WordTiming("air.", 600, 1100))


def test_a_word_is_heard_once_its_start_has_played() -> None:
    assert heard_by_timings("It has no air.", WORDS, 0).text == ""
    assert heard_by_timings("It has no air.", WORDS, 1).text == "It"
    assert heard_by_timings("It has no air.", WORDS, 450).text == "It has"
    heard = heard_by_timings("It has no air.", WORDS, 451)
    assert (heard.count, heard.total, heard.text, heard.by) == (3, 4, "It has no", "timings")
    assert current_word(WORDS, 451) == 2 and current_word(WORDS, 0) is None


def test_the_sentence_keeps_its_own_words_unless_the_endpoint_counted_others() -> None:
    # Counted alike, the sentence's own words (its spacing normalized); the endpoint respelled "1969" as two words,
    # so its words are the ones that were said.
    assert heard_by_timings("It has  no air.", WORDS, 700).text == "It has no air."
    respelled = (WordTiming("In", 0, 100), WordTiming("nineteen", 100, 500), WordTiming("sixty-nine.", 500, 900))
    assert heard_by_timings("In 1969.", respelled, 300).text == "In nineteen"


def test_without_times_the_played_fraction_cuts_at_a_word_boundary() -> None:
    text = "It has no air and no liquid water."  # 34 characters: half is at the 17th, inside "and"
    assert heard_by_fraction(text, 0.5, 1.0).text == "It has no air and"
    assert heard_by_fraction(text, 0.0, 1.0).text == ""
    assert heard_by_fraction(text, 2.0, 1.0).text == text
    assert heard_by_fraction(text, 0.5, 0.0).text == ""


def test_a_cut_keeps_earlier_sentences_whole_and_the_played_words_of_the_cut_one() -> None:
    plays = [SentencePlay(0, "The Moon is far.", 0.0, 1.5, complete=True),
             SentencePlay(1, "It has no air.", 1.5, 1.1, WORDS, complete=True)]
    assert locate(plays, 0.0) is None and locate(plays, 0.1) == 0 and locate(plays, 1.5) == 0
    assert locate(plays, 1.6) == 1
    cut = cut_at(plays, 1.5 + 0.451)
    assert cut.spoken == "The Moon is far. It has no" and cut.sentence == 1
    assert cut.words is not None and cut.words.by == "timings" and cut.words_played == 4 + 3
    assert abs(cut.sentence_played_s - 0.451) < 1e-9
    everything = cut_at(plays, 9.0)
    assert everything.spoken == "The Moon is far. It has no air."
    nothing = cut_at([SentencePlay(0, "Late.", 0.2, 1.0)], 0.1)
    assert nothing.spoken == "" and nothing.sentence is None and nothing.words_played == 0


def test_times_that_do_not_reach_the_position_yet_give_way_to_the_fraction() -> None:
    # The words of the piece being played have not arrived: the times so far end before the position.
    partial = SentencePlay(0, "It has no air.", 0.0, 2.0, WORDS[:2], complete=False)
    cut = cut_at([partial], 1.0)
    assert cut.words is not None and cut.words.by == "fraction" and cut.spoken == "It has"
