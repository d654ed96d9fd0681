"""misaki G2P with the bundled espeak-ng fallback, offline; one phonemizer behind it for both engines."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
from pathlib import Path

import pytest
from voicecli_endpoint.g2p import UNKNOWN, Phonemizer

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
