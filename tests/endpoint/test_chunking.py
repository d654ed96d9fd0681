"""Chunking phonemes into sentence / clause pieces within the model's context."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from voicecli_endpoint.chunking import MAX_PHONEMES, ChunkPolicy, chunk_phonemes


def test_every_sentence_is_a_piece() -> None:
    assert chunk_phonemes("həlˈO. hˌW ɑɹ ju? fˈIn!") == ["həlˈO.", "hˌW ɑɹ ju?", "fˈIn!"]


def test_closing_quotes_stay_with_their_sentence() -> None:
    assert chunk_phonemes("hi sˈɛd “nˈO.” ðˈɛn lˈɛft.") == ["hi sˈɛd “nˈO.”", "ðˈɛn lˈɛft."]


def test_first_sentence_is_cut_at_its_first_long_enough_clause() -> None:
    first = "wˈɛl, ˈæftəɹ ɐ vˈɛɹi lˈɔŋ dˈA æt wˈɜɹk, ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst."
    assert chunk_phonemes(first + " ˈOkˌA.") == [
        "wˈɛl, ˈæftəɹ ɐ vˈɛɹi lˈɔŋ dˈA æt wˈɜɹk,",  # "wˈɛl," alone is too short to sound natural
        "ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst.",
        "ˈOkˌA.",
    ]


def test_later_sentences_are_not_cut_at_clauses() -> None:
    text = "ˈOkˌA. ˈæftəɹ ɐ vˈɛɹi lˈɔŋ dˈA æt wˈɜɹk, ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst."
    assert len(chunk_phonemes(text)) == 2


def test_a_long_later_sentence_is_cut_at_clauses_into_pieces_within_the_limit() -> None:
    clause = "ˈæftəɹ ɐ vˈɛɹi lˈɔŋ dˈA æt wˈɜɹk ænd ɐ lˈɔŋ wˈɔk hˈOm,"  # 52 symbols
    long = f"{clause} {clause} {clause} ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst."
    pieces = chunk_phonemes(f"ˈOkˌA. {long}", ChunkPolicy(long_sentence=120))
    assert pieces == ["ˈOkˌA.", f"{clause} {clause}", f"{clause} ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst."]
    assert all(len(piece) <= 120 for piece in pieces)
    assert chunk_phonemes(f"ˈOkˌA. {long}", ChunkPolicy(long_sentence=0)) == ["ˈOkˌA.", long]


def test_a_long_clause_is_never_split_inside() -> None:
    clause = " ".join(["wˈɜɹk"] * 30) + "."  # 179 symbols, no clause boundary
    assert chunk_phonemes(f"ˈOkˌA. {clause}", ChunkPolicy(long_sentence=120)) == ["ˈOkˌA.", clause]


def test_clause_cutting_can_be_turned_off() -> None:
    text = "ˈæftəɹ ɐ vˈɛɹi lˈɔŋ dˈA æt wˈɜɹk, ˈI θˈɪŋk wi ʃˌʊd ɹˈɛst."
    assert chunk_phonemes(text, ChunkPolicy(first_clause_min=0)) == [text]


def test_bare_punctuation_is_dropped() -> None:
    assert chunk_phonemes("!!! ... ?") == []
    assert chunk_phonemes("hˈI. ...") == ["hˈI."]


words = st.text(alphabet="abdefhiklmnOAIstuvwzæðŋɑɔəɛɪʊʌˈˌ", min_size=1, max_size=14)
marks = st.sampled_from(["", "", "", ",", ".", "!", "?", ";", " —"])


@given(st.lists(st.tuples(words, marks), min_size=1, max_size=250))
def test_pieces_fit_the_context_and_lose_nothing(tokens: list[tuple[str, str]]) -> None:
    phonemes = " ".join(word + mark for word, mark in tokens)
    pieces = chunk_phonemes(phonemes)
    assert all(0 < len(piece) <= MAX_PHONEMES for piece in pieces)
    letters = [ch for ch in phonemes if ch.isalpha()]
    assert [ch for piece in pieces for ch in piece if ch.isalpha()] == letters
