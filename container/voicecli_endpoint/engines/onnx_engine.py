"""Kokoro-82M on onnxruntime (the int8 v1.0 export through kokoro-onnx): the CPU engine.

kokoro-onnx is used only as a model runner. It is fed misaki phonemes (`is_phonemes=True`), never its own espeak
IPA, because Kokoro v1.0 was trained on misaki's symbols. Its trimming and pause insertion are turned off: the
raw model output is what the torch engine returns too, and the chunking upstream already decides the pieces.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np

from voicecli_endpoint.engines.base import Audio, Engine, kokoro_dir

MODEL_FILE = "kokoro-v1.0.int8.onnx"
VOICES_FILE = "voices-v1.0.bin"


class OnnxEngine(Engine):
    """kokoro-onnx + onnxruntime with an explicit thread budget (intra-op threads; inter-op 1).

    onnxruntime's worker threads spin-wait between operators by default. On a machine whose cores are shared
    with the LLM and speech recognition that burns the other processes' CPU and, measured here under load,
    made 2-thread synthesis ~1.6x slower (6 words: 4.1 s spinning vs 2.55 s not). So spinning is off unless
    `spin_wait=True` (a dedicated machine may gain a little from it).
    """

    name: ClassVar[str] = "onnx"

    def __init__(self, models_dir: Path, threads: int = 1, *, spin_wait: bool = False) -> None:
        import onnxruntime as ort
        from kokoro_onnx import Kokoro

        directory = kokoro_dir(models_dir)
        model_path, voices_path = directory / MODEL_FILE, directory / VOICES_FILE
        for path in (model_path, voices_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing; run `voicecli models install --only kokoro`")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin_wait else "0")
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        self._kokoro = Kokoro.from_session(session, str(voices_path))
        self._voices = tuple(sorted(str(name) for name in self._kokoro.voices.files))
        self.threads = threads

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    @property
    def device(self) -> str:
        return "cpu"

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        self.check_voice(voice)
        audio, _rate = self._kokoro.create(
            phonemes,
            voice=voice,
            speed=speed,
            is_phonemes=True,
            trim=False,
            sentence_pause=0.0,
            clause_pause=0.0,
        )
        return np.asarray(audio, dtype=np.float32).ravel()
