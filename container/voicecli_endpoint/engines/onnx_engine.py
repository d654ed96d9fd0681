"""Kokoro-82M on onnxruntime (the int8 v1.0 export through kokoro-onnx): the CPU engine.

kokoro-onnx is used for what it knows about the model (vocabulary, input names and dtypes, the voices file), never
for G2P: the engine is fed misaki phonemes, because Kokoro v1.0 was trained on misaki's symbols. Inference itself
calls the onnxruntime session directly, the same inputs kokoro-onnx's `create(..., is_phonemes=True, trim=False)`
builds, with no trimming or pauses: the raw model output is what the torch engine returns too, and the chunking
upstream already decides the pieces.

Why not `Kokoro.create`: several inference workers call this engine at once (voicecli_endpoint.scheduler).
onnxruntime documents `InferenceSession.run` as safe to call concurrently, and it releases the GIL while it runs.
kokoro-onnx's wrapper makes no such promise, and per call it re-reads and decompresses the voice from the shared
npz archive and does timing and pause bookkeeping in Python, under the GIL the other workers need. Here the voices
are decompressed once at load, and a call holds the GIL only to tokenize and to build three small arrays.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from voicecli_endpoint.engines.base import Audio, Engine, kokoro_dir

MODEL_FILE = "kokoro-v1.0.int8.onnx"
VOICES_FILE = "voices-v1.0.bin"


class OnnxEngine(Engine):
    """onnxruntime with an explicit thread budget (intra-op threads; inter-op 1); safe to call from many threads.

    onnxruntime's worker threads spin-wait between operators by default. On a machine whose cores are shared
    with the LLM and speech recognition that burns the other processes' CPU and, measured here under load,
    made 2-thread synthesis ~1.6x slower (6 words: 4.1 s spinning vs 2.55 s not). So spinning is off unless
    `spin_wait=True` (a dedicated machine may gain a little from it).
    """

    name: ClassVar[str] = "onnx"

    def __init__(self, models_dir: Path, threads: int = 1, *, spin_wait: bool = False, solo_threads: int = 0) -> None:
        import onnxruntime as ort
        from kokoro_onnx import Kokoro

        directory = kokoro_dir(models_dir)
        model_path, voices_path = directory / MODEL_FILE, directory / VOICES_FILE
        for path in (model_path, voices_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing; run `voicecli models install --only kokoro`")
        def open_session(intra_op_threads: int) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, intra_op_threads)
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin_wait else "0")
            return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])

        session = open_session(threads)
        kokoro = Kokoro.from_session(session, str(voices_path))
        self._session = session
        # A piece that runs while no other does takes all the cores (sizing.py): a second session, same weights.
        self._solo = open_session(solo_threads) if solo_threads > threads else None
        self._running = 0
        self._running_lock = threading.Lock()
        self.solo_runs = 0
        self._tokenizer = kokoro.tokenizer
        self._tokens_input: str = kokoro._tokens_input
        self._dtypes: dict[str, np.dtype[Any]] = dict(kokoro._input_dtypes)
        # One style row per phoneme count; all 54 voices are ~28 MB decompressed, read once here.
        self._styles: dict[str, npt.NDArray[Any]] = {
            str(name): np.asarray(kokoro.voices[name], dtype=self._dtypes["style"]) for name in kokoro.voices.files
        }
        self._voices = tuple(sorted(self._styles))
        self.threads = threads

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    @property
    def device(self) -> str:
        return "cpu"

    def warm_up(self, phonemes: str, voice: str) -> None:
        """Both sessions: a session's first runs allocate its memory arena up to the longest input seen (seen in
        the turns bench: a session's first answer, 10 words, took 1.27 s to synthesize; a similar one later 0.68 s)."""
        for session in (self._session, self._solo):
            if session is not None:
                session.run(None, self._inputs(phonemes, voice, 1.0))

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        inputs = self._inputs(phonemes, voice, speed)
        with self._running_lock:
            alone = self._running == 0
            self._running += 1
        session = self._solo if alone and self._solo is not None else self._session
        try:
            outputs = session.run(None, inputs)
        finally:
            with self._running_lock:
                self._running -= 1
                self.solo_runs += session is self._solo
        return np.asarray(outputs[0], dtype=np.float32).ravel()

    def _inputs(self, phonemes: str, voice: str, speed: float) -> dict[str, Any]:
        self.check_voice(voice)
        tokens = self._tokenizer.tokenize(" ".join(phonemes.split()))
        if not tokens:
            raise ValueError(f"no phoneme of {phonemes!r} is in the model's vocabulary")
        style = self._styles[voice]
        inputs = {
            self._tokens_input: np.array([[0, *tokens, 0]], dtype=self._dtypes[self._tokens_input]),
            "style": style[min(len(tokens), len(style)) - 1],  # one style row per token count, as kokoro-onnx
            "speed": np.array([speed], dtype=self._dtypes["speed"]),
        }
        return inputs

