"""misaki G2P with the bundled espeak-ng fallback, offline; one phonemizer behind it for both engines."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from misaki.en import subtokenize
from voicecli_endpoint.g2p import MAX_GROUP_SUBTOKENS, SEGMENT_SUBTOKENS, UNKNOWN, Phonemizer, prepare

# A fixed text set and the phonemes it gave before the phonemizer/phonemizer-fork clash was resolved (recorded with
# both installed, phonemizer-fork 3.3.2's files on top). Made-up words and "Kokoro" are not in misaki's lexicon, so
# they go through the espeak fallback, the part that imports the `phonemizer` package.
FIXED_TEXTS = {
    "Hello there.": "həlˈO ðˈɛɹ.",
    "The capital of France is Paris.": "ðə kˈæpəTᵊl ʌv fɹˈæns ɪz pˈɛɹəs.",
    "It costs $12.50, doesn't it?": "ˌɪt kˈɔsts twˈɛlv dˈɑləɹz ænd fˈɪfti sˈɛnts, dˈʌzᵊnt ɪt?",
    "Dr. Smith arrived at 3:30 pm on May 4th, 2021.":
        "dˈɑktəɹ smˈɪθ əɹˈIvd æt θɹˈi:θˈɜɹTi pˌiˈɛm ˌɔn mˈA fˈɔɹθ, twˈɛnti twˈɛnti wˈʌn.",
    "Zorblaxian quibbletronics flummoxed the grobnitz.": "zɔɹblˈAksiən kwˌɪbᵊltɹˈɑnɪks flˈʌməkst ðə ɡɹˈɑbnɪts.",
    "Kokoro speaks; Whisper listens!": "kəkˈɔɹO spˈiks; wˈɪspəɹ lˈɪsᵊnz!",
    "I read the book yesterday, and I will read it again.": "ˌI ɹˈɛd ðə bˈʊk jˈɛstəɹdˌA, ænd ˌI wɪl ɹˈid ɪt əɡˈɛn.",
}


def test_one_distribution_owns_the_phonemizer_package() -> None:
    # kokoro-onnx wants `phonemizer`, misaki `phonemizer-fork`; both write phonemizer/, and removing either breaks the
    # other (kokoro-onnx issue #111). The locks keep upstream phonemizer only (requirements/overrides.txt).
    owners = importlib.metadata.packages_distributions().get("phonemizer", [])
    assert owners == ["phonemizer"], f"phonemizer/ is owned by {owners}: run scripts/setup (it removes the fork)"
    import phonemizer

    assert phonemizer.__version__ == importlib.metadata.version("phonemizer")


@pytest.mark.slow
def test_shared_g2p_gives_the_recorded_phonemes(phonemizer: Phonemizer) -> None:
    # Both engines synthesize what this one Phonemizer writes (engines/base.py), so this is their G2P.
    assert {text: phonemizer(text) for text in FIXED_TEXTS} == FIXED_TEXTS


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("kokoro") is None, reason="the torch extra is not installed")
def test_the_torch_packages_own_g2p_agrees() -> None:
    # kokoro's KPipeline builds misaki G2P and its espeak fallback its own way; with one phonemizer installed it
    # must still write what the shared Phonemizer writes.
    from kokoro import KPipeline

    pipeline = KPipeline(lang_code="a", repo_id="hexgrad/Kokoro-82M", model=False)
    assert {text: pipeline.g2p(text)[0] for text in FIXED_TEXTS} == FIXED_TEXTS


def test_both_engines_turn_the_phonemes_into_the_same_tokens(models_dir: Path) -> None:
    # The onnx engine tokenizes with kokoro-onnx's vocabulary, the torch engine with KModel's, read from the installed
    # weights' config.json (the hub's, or kokoro-onnx's copy when rebuilt): every recorded phoneme is a token for both.
    from kokoro_onnx.tokenizer import Tokenizer
    from voicecli_endpoint.engines.base import kokoro_torch_dir
    from voicecli_endpoint.engines.torch_engine import CONFIG_FILE

    from voicecli.models.kokoro_torch import load_kokoro_config

    installed = kokoro_torch_dir(models_dir) / CONFIG_FILE
    config = json.loads(installed.read_text(encoding="utf-8")) if installed.is_file() else load_kokoro_config()
    onnx = Tokenizer()
    torch_vocab: dict[str, int] = config["vocab"]
    for phonemes in FIXED_TEXTS.values():
        onnx_tokens = onnx.tokenize(phonemes)
        assert onnx_tokens == [torch_vocab[p] for p in phonemes if p in torch_vocab]
        assert len(onnx_tokens) == len(phonemes), f"symbols outside the vocabulary in {phonemes!r}"


@pytest.fixture(scope="module")
def phonemizer() -> Phonemizer:
    return Phonemizer()


@pytest.mark.slow
def test_known_words_use_misaki_symbols(phonemizer: Phonemizer) -> None:
    # misaki writes diphthongs as single capital letters (O, A, I, W), unlike espeak IPA
    assert phonemizer("Hello there.") == "həlˈO ðˈɛɹ."


@pytest.mark.slow
def test_numbers_and_punctuation(phonemizer: Phonemizer) -> None:
    phonemes = phonemizer("It costs $12, okay?")
    assert "twˈɛlv" in phonemes and phonemes.endswith("?") and "," in phonemes


@pytest.mark.slow
def test_unknown_words_fall_back_to_espeak(phonemizer: Phonemizer) -> None:
    assert phonemizer.has_fallback
    phonemes = phonemizer("Zorblaxian")
    assert phonemes and UNKNOWN not in phonemes and any(ch.isalpha() for ch in phonemes)


@pytest.mark.slow
def test_whitespace_is_normalised(phonemizer: Phonemizer) -> None:
    assert phonemizer("Hi.\n\n  Bye.") == "hˈI. bˈI."


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("aZ1-_/.'😀\u0301 é,"), max_size=300))
def test_prepared_groups_are_short_and_keep_every_sound(text: str) -> None:
    """Whatever the text, misaki sees word groups of at most MAX_GROUP_SUBTOKENS subtokens (its cost is cubic in
    them) and segments of about SEGMENT_SUBTOKENS; the characters it gets are the text's, less extra combining
    marks, spaces and the commas of long numbers."""
    segments = prepare(text)
    for segment in segments:
        assert sum(len(subtokenize(group)) for group in segment) <= SEGMENT_SUBTOKENS or len(segment) == 1
        assert all(len(subtokenize(group)) <= MAX_GROUP_SUBTOKENS for group in segment)
    letters = "".join(char for char in unicodedata.normalize("NFC", text) if char.isalpha())
    kept = "".join(char for segment in segments for group in segment for char in group if char.isalpha())
    assert kept.replace("point", "") == letters.replace("point", "")  # a long number's "." is read "point"


def test_ordinary_text_is_prepared_unchanged() -> None:
    for text in [*FIXED_TEXTS, "A state-of-the-art, mother-in-law's car costs 1,250,000 dollars."]:
        assert " ".join(group for segment in prepare(text) for group in segment) == text


def test_long_numbers_are_spelled_digit_by_digit_and_combining_marks_capped() -> None:
    assert prepare("9" * 16) == [list("9" * 16)]
    assert prepare("123,456") == [["123,456"]]
    assert prepare("e" + "\u0301" * 2000) == [["é\u0301\u0301"]]  # NFC makes é; two of the other marks are kept


@pytest.mark.slow
def test_g2p_of_hostile_texts_is_about_linear(phonemizer: Phonemizer) -> None:
    """The probes of issue 23 (each took seconds: `-`-joined 160 a's 10.7 s alone) now cost about what ordinary
    text of their length does; 5 s is ~100x today's cost, so only a return of the cubic case can fail this."""
    for text in ["-".join(["a"] * 160), "_".join(["a"] * 160), "/".join(["a"] * 160), "a1" * 160, "😀" * 900,
                 "a" + "\u0301" * 1999]:
        started = time.perf_counter()
        phonemizer(text)
        assert time.perf_counter() - started < 5.0, text[:20]


@pytest.mark.slow
def test_a_g2p_call_is_abandoned_between_segments(phonemizer: Phonemizer) -> None:
    calls = 0

    def stop_after_one() -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise TimeoutError("abandoned")

    with pytest.raises(TimeoutError):
        phonemizer("Hello there. " * 100, stop_after_one)
    assert calls == 2
    assert phonemizer("Hello there.") == FIXED_TEXTS["Hello there."]  # the lock was released
