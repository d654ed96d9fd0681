"""The torch engine (weights rebuilt from the int8 ONNX model) and the ONNX model say the same thing.

Both sides get the same misaki phonemes, the same token ids and the same style vector (voice pack row
len(phonemes) - 1, which is what KPipeline and kokoro-onnx both pick when every phoneme is in the vocabulary).

Durations. The int8 export has no duration output (its only output is `audio`), so the ONNX side runs a copy of
the graph with one more output: the `Clip` after `Round` in the encoder, which is exactly KModel's
`round(sum(sigmoid(duration_proj))).clamp(min=1)`, i.e. pred_dur. The torch side returns pred_dur from KModel.

Spectra. Waveforms cannot be compared sample by sample: the torch decoder draws random phase/noise in its
harmonic source (the ONNX export has it folded to constants), and a 1-frame duration difference shifts everything
after it. So each side's log-mel spectrogram (80 bands, 12.5 ms hop = 2 spectrogram frames per model frame) is cut
into tokens using that side's own durations, each token is reduced to its mean log-mel vector, and we correlate the
two (tokens x 80) matrices. That compares what is said, token by token, and not where the noise falls.

Thresholds, measured on this machine (af_heart on the ONNX side; torch runs repeated 3 times, its durations are
deterministic and its correlation moves in the 4th decimal):
- correct rebuild: durations equal on 94.5% and 95.4% of tokens of the two sentences below (93.3% on a short
  "Hello there, how are you today?"), never off by more than 1 frame; token log-mel correlation 0.981-0.991.
- wrong voice on the torch side: af_bella (the closest to af_heart) durations equal on 77-86%, off by up to 4
  frames, correlation 0.926-0.935; am_michael 57-70%, up to 4 frames, 0.76-0.80.
- LSTM gates swapped (f <-> o, the mistake the notes warn about): durations equal on 7-26%, off by up to 11;
  correlation 0.54-0.74.
So: durations must be equal on >= 88% of tokens and all within 1 frame; correlation >= 0.96 (0.02 below the worst
correct run, 0.025 above the best wrong-voice run). The last two tests check that both wrong cases fail these
thresholds, so the test can tell a wrong conversion from a right one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from voicecli_endpoint.engines.torch_engine import TorchEngine

from tests.kokoro_torch_build import ONNX_FILE, VOICES_FILE, rebuilt_models_dir

TEXTS = (
    "The quick brown fox jumps over the lazy dog, and then it runs far away into the quiet green forest.",
    "I think we should meet again next week to talk about the plan.",
)
VOICE = "af_heart"
SIMILAR_VOICE = "af_bella"
MIN_EXACT_DURATIONS = 0.88
MAX_DURATION_DIFF = 1
MIN_TOKEN_LOGMEL_CORR = 0.96
SAMPLE_RATE = 24_000
MEL_HOP = 300
"""Half a model frame (600 samples), so every token spans a whole number of spectrogram frames."""

pytestmark = pytest.mark.slow

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Spoken:
    audio: FloatArray
    durations: IntArray


class OnnxWithDurations:
    """The int8 ONNX model on onnxruntime with pred_dur exposed as a second output."""

    def __init__(self, onnx_path: Path, threads: int) -> None:
        import onnx
        import onnxruntime as ort

        model = onnx.load(str(onnx_path))
        producers = {out: node for node in model.graph.node for out in node.output}
        clip = next(n for n in model.graph.node
                    if n.op_type == "Clip" and producers[n.input[0]].op_type == "Round")
        model.graph.output.append(onnx.helper.make_tensor_value_info(clip.output[0], onnx.TensorProto.FLOAT, None))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

    def speak(self, token_ids: list[int], style: FloatArray) -> Spoken:
        audio, durations = self._session.run(None, {
            "tokens": np.array([[0, *token_ids, 0]], dtype=np.int64),
            "style": style.astype(np.float32),
            "speed": np.array([1.0], dtype=np.float32),
        })
        return Spoken(np.asarray(audio, dtype=np.float32).ravel(), np.asarray(durations).ravel().astype(np.int64))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, models_dir: Path) -> TorchEngine:
    return TorchEngine(rebuilt_models_dir(tmp_path_factory, models_dir), threads=2, device="cpu")


@pytest.fixture(scope="module")
def onnx_model(models_dir: Path) -> OnnxWithDurations:
    return OnnxWithDurations(models_dir / "kokoro" / ONNX_FILE, threads=2)


@pytest.fixture(scope="module")
def voices(models_dir: Path) -> Iterator[Any]:
    with np.load(models_dir / "kokoro" / VOICES_FILE) as npz:
        yield npz


@pytest.fixture(scope="module")
def phonemes() -> list[str]:
    from voicecli_endpoint.g2p import Phonemizer

    g2p = Phonemizer()
    return [g2p(text) for text in TEXTS]


def _onnx_speak(onnx_model: OnnxWithDurations, engine: TorchEngine, voices: Any, ps: str) -> Spoken:
    vocab: dict[str, int] = engine._model.vocab
    assert all(p in vocab for p in ps), "a phoneme outside the vocabulary would shift the style row"
    return onnx_model.speak([vocab[p] for p in ps], voices[VOICE][len(ps) - 1])


def _torch_speak(engine: TorchEngine, ps: str, voice: str = VOICE) -> Spoken:
    timed = engine.synthesize_timed(ps, voice, 1.0)
    return Spoken(timed.audio, timed.durations)


def _log_mel(audio: FloatArray, n_fft: int = 1200, n_mels: int = 80) -> FloatArray:
    """Log power in HTK-mel triangles, frames every MEL_HOP samples (centered)."""
    power = torch.stft(torch.from_numpy(audio), n_fft, MEL_HOP, window=torch.hann_window(n_fft),
                       center=True, return_complex=True).abs().square().numpy()
    freqs = np.linspace(0.0, SAMPLE_RATE / 2, n_fft // 2 + 1)
    mel_edges = np.linspace(0.0, 2595 * np.log10(1 + (SAMPLE_RATE / 2) / 700), n_mels + 2)
    hz = 700 * (10 ** (mel_edges / 2595) - 1)
    bank = np.stack([np.clip(np.minimum((freqs - lo) / (mid - lo), (hi - freqs) / (hi - mid)), 0.0, None)
                     for lo, mid, hi in zip(hz[:-2], hz[1:-1], hz[2:], strict=True)])
    log_mel: FloatArray = np.log(bank @ power + 1e-5).astype(np.float32)
    return log_mel


def _token_means(spoken: Spoken) -> FloatArray:
    mel = _log_mel(spoken.audio)
    edges = np.concatenate([[0], np.cumsum(spoken.durations)]) * (600 // MEL_HOP)
    return np.stack([mel[:, a:max(b, a + 1)].mean(axis=1) for a, b in itertools.pairwise(edges)])


def token_logmel_corr(a: Spoken, b: Spoken) -> float:
    return float(np.corrcoef(_token_means(a).ravel(), _token_means(b).ravel())[0, 1])


def durations_agree(a: Spoken, b: Spoken) -> bool:
    if a.durations.shape != b.durations.shape:
        return False
    diff = np.abs(a.durations - b.durations)
    return bool(np.mean(diff == 0) >= MIN_EXACT_DURATIONS and diff.max() <= MAX_DURATION_DIFF)


def test_onnx_durations_account_for_its_audio(
    onnx_model: OnnxWithDurations, engine: TorchEngine, voices: Any, phonemes: list[str]
) -> None:
    """The exposed Clip output really is pred_dur: the audio is 600 samples per predicted frame."""
    spoken = _onnx_speak(onnx_model, engine, voices, phonemes[1])
    assert spoken.audio.size == 600 * int(spoken.durations.sum())


def test_onnx_engine_speaks_exactly_what_this_runner_does(
    onnx_model: OnnxWithDurations, engine: TorchEngine, voices: Any, phonemes: list[str], models_dir: Path
) -> None:
    """So comparing against this runner is comparing against the endpoint's OnnxEngine (the export is
    deterministic: it has no random ops)."""
    from voicecli_endpoint.engines.onnx_engine import OnnxEngine

    ps = phonemes[1]
    served = OnnxEngine(models_dir, threads=2).synthesize_phonemes(ps, VOICE, 1.0)
    np.testing.assert_allclose(served, _onnx_speak(onnx_model, engine, voices, ps).audio, atol=1e-5)


@pytest.fixture(scope="module")
def both_engines(
    onnx_model: OnnxWithDurations, engine: TorchEngine, voices: Any, phonemes: list[str]
) -> list[tuple[str, Spoken, Spoken]]:
    """(phonemes, torch, onnx) for every text, synthesized once for the tests below."""
    return [(ps, _torch_speak(engine, ps), _onnx_speak(onnx_model, engine, voices, ps)) for ps in phonemes]


def test_durations_agree(both_engines: list[tuple[str, Spoken, Spoken]]) -> None:
    for ps, ours, reference in both_engines:
        assert len(ours.durations) == len(ps) + 2
        assert ours.audio.size == 600 * int(ours.durations.sum())
        assert durations_agree(ours, reference), (ours.durations.tolist(), reference.durations.tolist())


def test_token_log_mel_agrees(both_engines: list[tuple[str, Spoken, Spoken]]) -> None:
    for _ps, ours, reference in both_engines:
        corr = token_logmel_corr(ours, reference)
        assert corr >= MIN_TOKEN_LOGMEL_CORR, corr


def test_a_different_voice_fails_the_thresholds(
    engine: TorchEngine, both_engines: list[tuple[str, Spoken, Spoken]]
) -> None:
    ps, _ours, reference = both_engines[0]
    ours = _torch_speak(engine, ps, SIMILAR_VOICE)
    assert not durations_agree(ours, reference)
    assert token_logmel_corr(ours, reference) < MIN_TOKEN_LOGMEL_CORR


def _swap_forget_and_output_gates(model: torch.nn.Module) -> None:
    """Reorder every LSTM weight's gate blocks i,f,g,o -> i,o,g,f (an involution: call twice to undo)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "_l0" in name:
                i, f, g, o = param.data.chunk(4, dim=0)
                param.data.copy_(torch.cat([i, o, g, f], dim=0))


def test_swapped_lstm_gates_fail_the_thresholds(
    engine: TorchEngine, both_engines: list[tuple[str, Spoken, Spoken]]
) -> None:
    ps, _ours, reference = both_engines[0]
    _swap_forget_and_output_gates(engine._model)
    try:
        ours = _torch_speak(engine, ps)
    finally:
        _swap_forget_and_output_gates(engine._model)
    assert not durations_agree(ours, reference)
    assert token_logmel_corr(ours, reference) < MIN_TOKEN_LOGMEL_CORR
