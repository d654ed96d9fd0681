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


LONG = "ɐ spˈIdəɹ hæz ˈAt lˈɛɡz, wˌɪʧ ɪt jˈuzᵻz tə wˈɔk ænd klˈIm."
"""A spider has eight legs, which it uses to walk and climb: ~4 s of audio, decoded in four parts."""


def test_the_split_model_gives_the_samples_of_the_whole_graph(engine: OnnxEngine, models_dir: Path) -> None:
    """The engine runs the model as encoder + decoder (cut in memory at load); same nodes, same samples."""
    import onnxruntime as ort
    from voicecli_endpoint.engines.onnx_engine import MODEL_FILE

    whole_graph = ort.InferenceSession(str(models_dir / "kokoro" / MODEL_FILE), providers=["CPUExecutionProvider"])
    reference = whole_graph.run(None, engine._inputs(LONG, "af_heart", 1.0))[0].ravel()
    assert np.array_equal(engine.synthesize_phonemes(LONG, "af_heart", 1.0), reference)


def test_a_long_piece_comes_in_parts_that_say_the_same_words(engine: OnnxEngine, models_dir: Path) -> None:
    """Parts: as long as the whole together, the first one holding the first words, as loud as the whole, and
    Whisper hears the same sentence in both (each part is decoded with its own normalisation, so the samples differ
    a little: decoder_parts.py)."""
    from voicecli.audio.resample import resample
    from voicecli.listen.transcription import Transcriber

    whole = engine.synthesize_phonemes(LONG, "af_heart", 1.0)
    steps = list(engine.synthesize_parts(LONG, "af_heart", 1.0))
    assert [last for _, last in steps] == [False] * (len(steps) - 1) + [True]
    parts = [audio for audio, _ in steps]
    joined = np.concatenate(parts)
    assert len(parts) >= 3 and len(joined) == len(whole)
    first_sound = int(np.flatnonzero(np.abs(whole) > 0.01)[0])
    assert len(parts[0]) - first_sound > 0.25 * SAMPLE_RATE  # a quarter second of speech or more comes first
    assert len(parts[0]) < 0.4 * len(whole)

    def db(audio: np.ndarray) -> float:
        return float(10 * np.log10(np.mean(audio**2)))

    assert abs(db(joined) - db(whole)) < 1.5
    whisper = Transcriber("base", beam_size=5, threads=2, models_dir=models_dir)  # tiny.en: "and" vs "in" by chance
    heard = [whisper.transcribe_sync(resample(audio, SAMPLE_RATE, 16_000)).text for audio in (whole, joined)]
    words = [" ".join("".join(c for c in text.lower() if c.isalpha() or c == " ").split()) for text in heard]
    assert words[0] == words[1] and "spider" in words[0] and "climb" in words[0], heard


def test_a_short_piece_is_one_part_the_whole(engine: OnnxEngine) -> None:
    [(part, last)] = list(engine.synthesize_parts("hˈI.", "af_heart", 1.0))
    assert last and np.array_equal(part, engine.synthesize_phonemes("hˈI.", "af_heart", 1.0))


def test_an_unknown_voice_is_refused_before_any_part(engine: OnnxEngine) -> None:
    with pytest.raises(UnknownVoiceError):
        next(engine.synthesize_parts(LONG, "xx_nobody", 1.0))
