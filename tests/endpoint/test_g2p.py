"""misaki G2P with the bundled espeak-ng fallback, offline."""

from __future__ import annotations

import pytest
from voicecli_endpoint.g2p import UNKNOWN, Phonemizer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


def test_known_words_use_misaki_symbols(phonemizer: Phonemizer) -> None:
    # misaki writes diphthongs as single capital letters (O, A, I, W), unlike espeak IPA
    assert phonemizer("Hello there.") == "həlˈO ðˈɛɹ."


def test_numbers_and_punctuation(phonemizer: Phonemizer) -> None:
    phonemes = phonemizer("It costs $12, okay?")
    assert "twˈɛlv" in phonemes and phonemes.endswith("?") and "," in phonemes


def test_unknown_words_fall_back_to_espeak(phonemizer: Phonemizer) -> None:
    assert phonemizer.has_fallback
    phonemes = phonemizer("Zorblaxian")
    assert phonemes and UNKNOWN not in phonemes and any(ch.isalpha() for ch in phonemes)


def test_whitespace_is_normalised(phonemizer: Phonemizer) -> None:
    assert phonemizer("Hi.\n\n  Bye.") == "hˈI. bˈI."
