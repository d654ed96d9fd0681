"""Was the question understood, and was it answered right: how `voicecli bench turns` scores what it heard.

Speed alone can hide an app that answers fast and wrong; the turns bench therefore scores each question whose text
(and accepted answers) it knows: the transcript's word errors against the text, and whether the answer holds one
of the accepted answers. Both sides are normalised alike first (`words`): case and punctuation dropped, hyphens and
commas inside numbers undone, and numbers written as words read as digits ("twenty-one" and "21" are one word),
so "5 + 7 = 12" and "five plus seven is twelve" both hold "12", and "What is ten minus four?" heard as "What is
10 minus 4?" has no error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
          "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS: dict[str, int] = {word: value for value, word in enumerate(_UNITS)}
NUMBER_WORDS.update({word: 20 + 10 * index for index, word in enumerate(_TENS)})
SCALES: dict[str, int] = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|-?\d+(?:\.\d+)?")


def _tokens(text: str) -> list[str]:
    flat = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text.lower())  # 1,000 -> 1000
    flat = flat.replace("-", " ").replace("’", "'")
    return _TOKEN.findall(flat)


def words(text: str) -> list[str]:
    """`text` as the words scoring compares: lower case, no punctuation, numbers as digits."""
    out: list[str] = []
    total = current = 0
    in_number = False

    def flush() -> None:
        nonlocal total, current, in_number
        if in_number:
            out.append(str(total + current))
        total = current = 0
        in_number = False

    tokens = _tokens(text)
    for index, token in enumerate(tokens):
        if token in NUMBER_WORDS:
            value = NUMBER_WORDS[token]
            if not in_number:
                current, in_number = value, True
            elif value < 10 and current % 100 >= 20 and current % 10 == 0:
                current += value  # twenty one, one hundred twenty one
            elif value < 100 and current and current % 100 == 0:
                current += value  # one hundred five, two hundred twenty
            elif current == 0 and total:
                current = value  # three thousand two (hundred)
            else:  # two numbers in a row ("one two"): each on its own
                flush()
                current, in_number = value, True
        elif token in SCALES and in_number:
            scale = SCALES[token]
            if scale == 100:
                current = max(current, 1) * 100
            else:
                total += max(current, 1) * scale
                current = 0
        elif token == "and" and in_number and index + 1 < len(tokens) and tokens[index + 1] in NUMBER_WORDS:
            continue  # one hundred and five
        else:
            flush()
            out.append(token)
    flush()
    return out


def word_errors(reference: str, heard: str) -> int:
    """Substitutions, insertions and deletions between the two texts' `words` (Levenshtein over words)."""
    ref, hyp = words(reference), words(heard)
    row = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, hyp_word in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ref_word != hyp_word))
    return row[-1]


def holds_answer(answer: str, accepted: Sequence[str]) -> bool:
    """Whether `answer` holds one of the `accepted` answers as a whole word or phrase (after `words`)."""
    said = words(answer)
    for option in accepted:
        wanted = words(option)
        if wanted and any(said[i: i + len(wanted)] == wanted for i in range(len(said) - len(wanted) + 1)):
            return True
    return False


@dataclass(frozen=True)
class Score:
    """One question's scores; None where the question's text or accepted answers are unknown."""

    word_errors: int | None
    reference_words: int | None
    answer_right: bool | None


def score(text: str, accepted: Sequence[str], transcripts: Sequence[str], answers: Sequence[str]) -> Score:
    """Score one question from what the app heard (its turns' transcripts, joined) and answered (all its turns)."""
    if not text:
        return Score(None, None, None)
    heard = " ".join(transcripts)
    right = holds_answer(" ".join(answers), accepted) if accepted else None
    return Score(word_errors(text, heard), len(words(text)), right)
