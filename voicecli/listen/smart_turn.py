"""Prosody end of turn: Pipecat's Smart Turn v3.2 says whether the voice sounds finished.

Why a prosody model beside the text rule (voicecli.listen.turn_completion): the words of "the capital of ... Spain"
say "unfinished" at the pause, but "What is the capital of Spain" with a flat, trailing-off voice and "Tell me the
opposite of" look alike to a transcript that Whisper punctuated with a period. Intonation, a final lengthening and
the way the voice falls carry the rest; people use them to take the turn ~200 ms into a pause. Smart Turn v3.2 is a
small Whisper-encoder classifier trained on exactly that question (BSD-2, 8.7 MB int8 ONNX): input the last 8 s of
the utterance at 16 kHz as Whisper log-mels [1, 80, 800], output one sigmoid probability that the turn is complete.

How the input is built (what Pipecat's own analyzer feeds it, re-implemented here, not copied): the audio up to now
(speech plus the silence heard so far), the last 8 s kept, or zeros put IN FRONT when shorter (the end of speech
must sit at the end of the window); the 8 s normalised to zero mean and unit variance; then Whisper's log-mel
(n_fft 400, hop 160, 80 Slaney mels, log10 clamped 8 below the peak, (x + 4) / 4, the last STFT frame dropped:
128,000 samples -> 800 frames). faster-whisper's FeatureExtractor computes exactly that with `padding=0`; it agrees
with Pipecat's numpy implementation to ~1e-5 on speech, silence and noise (float32 vs float64), so no second
feature extractor is carried.

Cost (measured on this project's 2-core CPU VM, 3 s of audio, p50 of 50 runs under `flock /tmp/bench.lock`):
~51 ms per call with 1 thread (~9 ms of it the features), 56 ms with 2 threads, so it can run at every pause; one
thread by default because Whisper decodes on the other core at the same moment.

What it hears badly (measured, voicecli bench endpointing): espeak-ng's robotic voice (a question cut
mid-sentence often scores HIGHER than the whole one), and TTS phrases that stop where a sentence could end.

The model file is a catalog model ("smart-turn", built from the pipecat-ai wheel on PyPI and pinned by sha256):
pipecat itself is not a dependency.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE

MODEL_NAME = "smart-turn"
"""The catalog model (`voicecli models install --only smart-turn`)."""
MODEL_FILE = "smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8
"""Seconds of audio the model sees (the end of the utterance)."""
WINDOW_SAMPLES = WINDOW_S * SPEECH_RATE
FRAMES = 800
"""Log-mel frames of an 8 s window (hop 160, the last STFT frame dropped)."""
_NORM_EPS = 1e-7

Audio = NDArray[np.float32]


class SmartTurnModelMissing(FileNotFoundError):
    """The Smart Turn ONNX file is not in the models directory; the message names the command that installs it."""


def smart_turn_model_path(models_dir: Path) -> Path:
    """`<models_dir>/smart-turn/smart-turn-v3.2-cpu.onnx`, or a clear error naming the install command."""
    path = models_dir / MODEL_NAME / MODEL_FILE
    if not path.is_file():
        raise SmartTurnModelMissing(
            f"Smart Turn model not found at {path}: run `voicecli models install --only {MODEL_NAME}`"
        )
    return path


def last_window(audio16k: Audio) -> Audio:
    """The last 8 s of `audio16k`, or all of it with zeros in front: the model expects speech to end at the end."""
    samples = np.asarray(audio16k, dtype=np.float32).reshape(-1)
    if len(samples) >= WINDOW_SAMPLES:
        return samples[-WINDOW_SAMPLES:]
    return np.concatenate([np.zeros(WINDOW_SAMPLES - len(samples), dtype=np.float32), samples])


@functools.cache
def _extractor() -> Any:
    from faster_whisper.feature_extractor import FeatureExtractor

    return FeatureExtractor(feature_size=80, sampling_rate=SPEECH_RATE, hop_length=160, n_fft=400)


def features(audio16k: Audio) -> NDArray[np.float32]:
    """The model's input for `audio16k` (the utterance up to now at 16 kHz): log-mels of shape (1, 80, 800)."""
    window = last_window(audio16k)
    window = (window - window.mean()) / np.sqrt(window.var() + _NORM_EPS)
    mels = _extractor()(window.astype(np.float32), padding=0)
    return np.asarray(mels[np.newaxis, :, :FRAMES], dtype=np.float32)


class SmartTurn:
    """Smart Turn v3.2 on onnxruntime: `probability(audio)` that the speaker has finished their turn."""

    def __init__(self, models_dir: Path | None = None, *, model_path: Path | None = None, threads: int = 1) -> None:
        import onnxruntime

        if model_path is None:
            if models_dir is None:
                from voicecli.paths import default_models_dir

                models_dir = default_models_dir()
            model_path = smart_turn_model_path(models_dir)
        elif not model_path.is_file():
            raise SmartTurnModelMissing(f"Smart Turn model not found at {model_path}")
        self.model_path = model_path
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 4
        self._session: Any = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name

    def probability(self, audio16k: Audio) -> float:
        """Probability (0-1) that the turn is complete, from the last 8 s of `audio16k` (speech + the silence so
        far). Pipecat ends the turn at > 0.5; voicecli.listen.end_of_turn combines it with silence and text."""
        outputs = self._session.run(None, {self._input: features(audio16k)})
        return float(np.asarray(outputs[0]).reshape(-1)[0])
