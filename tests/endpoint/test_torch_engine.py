"""TorchEngine's contract (base.Engine) on the weights rebuilt in this session, on CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from voicecli_endpoint.engines.base import SAMPLE_RATE, UnknownVoiceError
from voicecli_endpoint.engines.torch_engine import TorchEngine

from tests.kokoro_torch_build import rebuilt_models_dir

pytestmark = pytest.mark.slow

PHONEMES = "həlˈO wˈɜɹld."
"""misaki's "Hello world." (every symbol is in Kokoro's vocabulary)."""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> TorchEngine:
    return TorchEngine(rebuilt_models_dir(tmp_path_factory, models_dir), threads=2, device="cpu")


def test_loads_every_voice_on_the_requested_device(engine: TorchEngine) -> None:
    assert len(engine.voices) == 54 and "af_heart" in engine.voices
    assert list(engine.voices) == sorted(engine.voices)
    assert engine.device == "cpu"
    assert engine.sample_rate == SAMPLE_RATE and engine.name == "torch"


def test_synthesizes_float32_mono_speech(engine: TorchEngine) -> None:
    audio = engine.synthesize_phonemes(PHONEMES, "af_heart", 1.0)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert 0.5 < audio.size / SAMPLE_RATE < 3.0
    assert np.isfinite(audio).all() and 0.05 < float(np.abs(audio).max()) <= 1.5


def test_durations_count_model_frames(engine: TorchEngine) -> None:
    timed = engine.synthesize_timed(PHONEMES, "af_heart", 1.0)
    assert timed.durations.shape == (len(PHONEMES) + 2,)  # plus the two boundary tokens
    assert timed.durations.min() >= 1
    assert timed.audio.size == 600 * int(timed.durations.sum())


def test_faster_speed_is_shorter(engine: TorchEngine) -> None:
    normal = engine.synthesize_timed(PHONEMES, "af_heart", 1.0).durations.sum()
    fast = engine.synthesize_timed(PHONEMES, "af_heart", 1.5).durations.sum()
    assert fast < normal


def test_rejects_unknown_voices_and_oversized_chunks(engine: TorchEngine) -> None:
    with pytest.raises(UnknownVoiceError):
        engine.synthesize_phonemes(PHONEMES, "nobody", 1.0)
    with pytest.raises(ValueError):
        engine.synthesize_phonemes("ə" * 511, "af_heart", 1.0)
    assert engine.synthesize_phonemes("", "af_heart", 1.0).size == 0


def test_missing_weights_say_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="install --only kokoro-torch"):
        TorchEngine(tmp_path, threads=1)


BATCH = [
    ("həlˈO wˈɜɹld.", "af_heart", 1.0),
    ("ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ, ænd ðˈɛn ɪt ɹˈʌnz əwˈA.", "am_adam", 1.2),
    ("jˈɛs.", "af_heart", 1.0),
    ("", "af_heart", 1.0),
    ("kˌʊd ju tˈɛl mˌi hˌW lˈɔŋ ðə tɹˈɪp tə ðə stˈAʃən tˈAks.", "bf_emma", 0.9),
]
"""Different lengths (so the batch is padded), voices and speeds, and an empty item."""


def test_a_batch_matches_the_same_items_one_by_one(engine: TorchEngine) -> None:
    """Batched and unbatched audio of the same items match, item by item.

    Seeded alike, because the decoder's sine source draws random phase and noise: the batch runs the decoders in
    item order, so it draws what the same calls one after another draw. The bound: the same single call with 1
    instead of 2 intra-op threads already differs by up to 5e-3 (float sums in another order, amplified by the
    decoder), and padding the token side does no more than that. Padding the decoder would change the length
    and normalisation of every shorter item, and a mismatched random stream would add noise of ~3e-2 amplitude:
    both fail here.
    """
    torch = pytest.importorskip("torch")
    torch.manual_seed(1234)
    single = [engine.synthesize_timed(*item) for item in BATCH]
    torch.manual_seed(1234)
    batched = engine.synthesize_batch_timed(BATCH)
    assert len(batched) == len(BATCH)
    for (phonemes, _, _), one, many in zip(BATCH, single, batched, strict=True):
        assert np.array_equal(one.durations, many.durations), phonemes
        assert one.audio.shape == many.audio.shape and many.audio.dtype == np.float32
        if not phonemes:
            assert many.audio.size == 0
            continue
        difference = one.audio - many.audio
        assert np.allclose(one.audio, many.audio, rtol=0, atol=1e-2), float(np.abs(difference).max())
        assert float(np.sqrt(np.mean(difference**2))) < 0.01 * float(np.sqrt(np.mean(one.audio**2)))
    assert [len(a) for a in engine.synthesize_batch(BATCH)] == [t.audio.size for t in single]


def test_a_batch_checks_every_item_before_it_runs(engine: TorchEngine) -> None:
    with pytest.raises(UnknownVoiceError):
        engine.synthesize_batch([(PHONEMES, "af_heart", 1.0), (PHONEMES, "nobody", 1.0)])
    with pytest.raises(ValueError, match="phonemes in one chunk"):
        engine.synthesize_batch([(PHONEMES, "af_heart", 1.0), ("ə" * 511, "af_heart", 1.0)])
