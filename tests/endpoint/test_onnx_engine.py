"""The ONNX engine on the real int8 Kokoro model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from voicecli_endpoint.engines.base import SAMPLE_RATE, UnknownVoiceError
from voicecli_endpoint.engines.onnx_engine import OnnxEngine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(models_dir: Path) -> OnnxEngine:
    return OnnxEngine(models_dir, threads=2)


def test_voices_and_device(engine: OnnxEngine) -> None:
    assert len(engine.voices) == 54 and list(engine.voices) == sorted(engine.voices)
    assert {"af_heart", "am_michael", "bf_emma"} <= set(engine.voices)
    assert engine.device == "cpu" and engine.sample_rate == SAMPLE_RATE


def test_synthesizes_float_audio(engine: OnnxEngine) -> None:
    audio = engine.synthesize_phonemes("hˈI.", "af_heart", 1.0)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert 0.2 < len(audio) / SAMPLE_RATE < 3.0
    assert float(np.abs(audio).max()) > 0.05  # speech, not silence


def test_speed_shortens_the_audio(engine: OnnxEngine) -> None:
    normal = engine.synthesize_phonemes("hˈI.", "af_heart", 1.0)
    fast = engine.synthesize_phonemes("hˈI.", "af_heart", 2.0)
    assert len(fast) < 0.75 * len(normal)


def test_unknown_voice(engine: OnnxEngine) -> None:
    with pytest.raises(UnknownVoiceError, match="af_heart"):
        engine.synthesize_phonemes("hˈI.", "xx_nobody", 1.0)


def test_missing_model_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="voicecli models install"):
        OnnxEngine(tmp_path)


def test_a_lone_piece_runs_on_the_all_cores_session_with_the_same_audio(models_dir: Path) -> None:
    """The solo session (sizing.py) is a speed-up only: same model, same inputs, the same audio within float noise;
    it is taken when no other piece is running, and pieces that overlap fall back to the per-worker session."""
    import threading

    engine = OnnxEngine(models_dir, threads=1, solo_threads=2)
    reference = OnnxEngine(models_dir, threads=1)
    phonemes = "ðə kˈæpɪtᵊl ʌv fɹˈæns ɪz pˈɛɹɪs."
    solo = engine.synthesize_phonemes(phonemes, "af_heart", 1.0)
    assert engine.solo_runs == 1
    single = reference.synthesize_phonemes(phonemes, "af_heart", 1.0)
    assert solo.shape == single.shape and np.allclose(solo, single, atol=1e-3)
    results: list[np.ndarray] = []
    start = threading.Barrier(3)

    def run() -> None:
        start.wait()
        results.append(engine.synthesize_phonemes(phonemes, "af_heart", 1.0))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 3 and all(np.allclose(r, single, atol=1e-3) for r in results)
    assert engine.solo_runs < 4  # at most one of the three overlapping runs took the solo session
