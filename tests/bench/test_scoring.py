"""voicecli.bench.scoring: word errors and right answers, after case, punctuation and number words."""

from __future__ import annotations

import pytest

from voicecli.bench.scoring import Score, holds_answer, score, word_errors, words


@pytest.mark.parametrize(("text", "expected"), [
    ("What is ten minus four?", ["what", "is", "10", "minus", "4"]),
    ("Twenty-one", ["21"]),
    ("one hundred and five", ["105"]),
    ("one hundred twenty one", ["121"]),
    ("three thousand two hundred", ["3200"]),
    ("It costs 1,000 dollars.", ["it", "costs", "1000", "dollars"]),
    ("one two three", ["1", "2", "3"]),
    ("Don't!", ["don't"]),
])
def test_words_are_normalised_alike_on_both_sides(text: str, expected: list[str]) -> None:
    assert words(text) == expected


@pytest.mark.parametrize(("reference", "heard", "errors"), [
    ("What is the capital of France?", "what is the capital of france", 0),
    ("What is ten minus four?", "What is 10 minus 4?", 0),
    ("What do bees make?", "What do these make?", 1),  # a substitution
    ("What is the capital of Spain?", "What is the capital of?", 1),  # a deletion
    ("Name a large animal.", "Name a large animal please.", 1),  # an insertion
    ("How many legs does a spider have?", "", 7),
])
def test_word_errors_count_substitutions_insertions_and_deletions(reference: str, heard: str, errors: int) -> None:
    assert word_errors(reference, heard) == errors


@pytest.mark.parametrize(("answer", "accepted", "right"), [
    ("The capital of France is Paris.", ["paris"], True),
    ("5 + 7 = 12", ["twelve"], True),
    ("Five plus seven is twelve.", ["12"], True),
    ("5 + 7 = 11", ["12"], False),
    ("10 minus 4 is 2", ["6", "six"], False),
    ("The Atlantic Ocean.", ["atlantic"], True),
    ("the Pacific", ["atlantic"], False),
    ("Parisian bakeries are famous.", ["paris"], False),  # a whole word, not a prefix
    ("It lies in North America.", ["north america"], True),  # a phrase
    ("A spider has 8 legs.", ["eight"], True),
])
def test_an_answer_is_right_when_it_holds_an_accepted_answer(answer: str, accepted: list[str], right: bool) -> None:
    assert holds_answer(answer, accepted) is right


def test_a_question_without_text_is_not_scored_and_one_without_answers_is_scored_for_its_transcript() -> None:
    assert score("", ["paris"], ["what is the capital of france"], ["Paris."]) == Score(None, None, None)
    assert score("Name a large animal.", [], ["Name a large animal."], ["An elephant."]) == Score(0, 4, None)
    split = score("What is the capital of Italy?", ["rome"], ["What is the capital of", "Italy?"], ["", "Rome."])
    assert split == Score(0, 6, True)  # a question split into two turns is scored on all it heard and said
