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

import contextlib
import logging
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from voicecli_endpoint.engines.base import Audio, Engine, TimedAudio, kokoro_dir, untimed
from voicecli_endpoint.engines.decoder_parts import Part, decode_parts, frame_energy, plan_parts

log = logging.getLogger(__name__)

MODEL_FILE = "kokoro-v1.0.int8.onnx"
VOICES_FILE = "voices-v1.0.bin"
DECODER_INPUTS = ("/encoder/MatMul_1_output_0", "/encoder/Reshape_output_0", "/encoder/Reshape_1_output_0")
"""The tensors the v1.0 export's decoder reads besides the style: the frame-aligned text features, the pitch (F0)
and the energy (N) curves. The engine cuts the graph there into an encoder and a decoder (decoder_parts.py)."""
DURATIONS = "/encoder/Clip_output_0"
"""The predicted frames per token (rounded, at least 1), which the export keeps inside the graph: the encoder half
gives it as a fourth output where the graph has it, for word times (voicecli_endpoint.word_timing)."""


@dataclass(frozen=True)
class _Graphs:
    """The model as two onnxruntime sessions with one thread budget: encoder (tokens -> frames) and decoder."""

    encoder: Any
    decoder: Any


class OnnxEngine(Engine):
    """onnxruntime with an explicit thread budget (intra-op threads; inter-op 1); safe to call from many threads.

    onnxruntime's worker threads spin-wait between operators by default. On a machine whose cores are shared
    with the LLM and speech recognition that burns the other processes' CPU and, measured here under load,
    made 2-thread synthesis ~1.6x slower (6 words: 4.1 s spinning vs 2.55 s not). So spinning is off unless
    `spin_wait=True` (a dedicated machine may gain a little from it).

    The model runs as its two halves (split in memory at load with onnx's extractor, ~0.3 s; the same nodes, so
    the same samples as the whole graph), which lets `synthesize_parts` decode a piece part by part.
    """

    name: ClassVar[str] = "onnx"
    parts: ClassVar[bool] = True

    def __init__(self, models_dir: Path, threads: int = 1, *, spin_wait: bool = False, solo_threads: int = 0) -> None:
        import onnxruntime as ort
        from kokoro_onnx import Kokoro

        directory = kokoro_dir(models_dir)
        model_path, voices_path = directory / MODEL_FILE, directory / VOICES_FILE
        for path in (model_path, voices_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing; run `voicecli models install --only kokoro`")
        halves = split_model(model_path)

        def open_session(model: bytes | str, intra_op_threads: int) -> Any:
            options = ort.SessionOptions()
            options.intra_op_num_threads = max(1, intra_op_threads)
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin_wait else "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spin_wait else "0")
            return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])

        def open_graphs(intra_op_threads: int) -> _Graphs:
            if halves is None:  # an export this engine cannot split: the whole graph, one part per piece
                return _Graphs(open_session(str(model_path), intra_op_threads), None)
            return _Graphs(*(open_session(half, intra_op_threads) for half in halves))

        self._graphs = open_graphs(threads)
        # kokoro-onnx reads the vocabulary, input names and dtypes from a session: the encoder has the model's inputs
        # and metadata (from_session would also want the session's file, which an in-memory half has not).
        kokoro: Any = Kokoro.__new__(Kokoro)
        kokoro._setup(session=self._graphs.encoder, model_path=str(model_path), voices_path=str(voices_path),
                      espeak_config=None, vocab_config=None)
        # A piece that runs while no other does takes all the cores (sizing.py): second sessions, same weights.
        self._solo = open_graphs(solo_threads) if solo_threads > threads else None
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
        """Every session, on the whole piece: a session's first runs allocate its memory arena up to the longest
        input seen (seen in the turns bench: a session's first answer, 10 words, took 1.27 s to synthesize; a
        similar one later 0.68 s). Parts are shorter than the whole, so they fit in that arena: warming them too
        doubled the warm-up (3.8 -> 7.8 s) and made the first parted piece no faster."""
        inputs = self._inputs(phonemes, voice, 1.0)
        for graphs in (self._graphs, self._solo):
            if graphs is not None:
                self._whole(graphs, inputs)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        inputs = self._inputs(phonemes, voice, speed)
        with self._taking() as graphs:
            return self._whole(graphs, inputs)

    def synthesize_timed(self, phonemes: str, voice: str, speed: float) -> TimedAudio:
        inputs = self._inputs(phonemes, voice, speed)
        if self._graphs.decoder is None:
            return untimed(self.synthesize_phonemes(phonemes, voice, speed))
        with self._taking() as graphs:
            frames = graphs.encoder.run(None, inputs)
            audio = self._decode(graphs, frames, inputs, 0, frames[0].shape[2])
        return self._timed(audio, frames, phonemes)

    def synthesize_parts(self, phonemes: str, voice: str, speed: float) -> Generator[tuple[Audio, bool]]:
        for audio, last, _ in self.synthesize_parts_timed(phonemes, voice, speed):
            yield audio, last

    def synthesize_parts_timed(self, phonemes: str, voice: str, speed: float
                               ) -> Generator[tuple[Audio, bool, TimedAudio | None]]:
        """Encoder and first part in the first step, one part per step after it; each step runs on the all-cores
        sessions when it is alone, like a whole piece. The durations come from the encoder, with the first part."""
        inputs = self._inputs(phonemes, voice, speed)
        if self._graphs.decoder is None:
            yield self.synthesize_phonemes(phonemes, voice, speed), True, None
            return
        with self._taking() as graphs:
            frames = graphs.encoder.run(None, inputs)

        def decode(start: int, stop: int) -> Audio:
            with self._taking() as graphs:
                return self._decode(graphs, frames, inputs, start, stop)

        parts = self._plan(frames)
        for index, audio in enumerate(decode_parts(decode, parts)):
            yield audio, index == len(parts) - 1, self._timed(audio[:0], frames, phonemes) if index == 0 else None

    def _timed(self, audio: Audio, frames: list[npt.NDArray[Any]], phonemes: str) -> TimedAudio:
        """`audio` with the durations the encoder gave (none from a graph without them)."""
        if len(frames) <= len(DECODER_INPUTS):
            return untimed(audio)
        symbols = "".join(symbol for symbol in " ".join(phonemes.split()) if symbol in self._tokenizer.vocab)
        return TimedAudio(audio, np.asarray(frames[len(DECODER_INPUTS)], dtype=np.float64).ravel().astype(np.int64),
                          symbols)

    @staticmethod
    def _plan(frames: list[npt.NDArray[Any]]) -> list[Part]:
        """Where to cut the decoding of the piece the encoder made `frames` of (its energy and pitch curves)."""
        return plan_parts(frame_energy(frames[2]), frame_energy(frames[1]))

    @contextlib.contextmanager
    def _taking(self) -> Iterator[_Graphs]:
        """The sessions for one run: the all-cores ones when no other run is going on."""
        with self._running_lock:
            alone = self._running == 0
            self._running += 1
        graphs = self._solo if alone and self._solo is not None else self._graphs
        try:
            yield graphs
        finally:
            with self._running_lock:
                self._running -= 1
                self.solo_runs += graphs is self._solo

    @classmethod
    def _whole(cls, graphs: _Graphs, inputs: dict[str, Any]) -> Audio:
        """The whole piece in one pass: encoder, then every frame decoded (or the unsplit graph)."""
        if graphs.decoder is None:
            return np.asarray(graphs.encoder.run(None, inputs)[0], dtype=np.float32).ravel()
        frames = graphs.encoder.run(None, inputs)
        return cls._decode(graphs, frames, inputs, 0, frames[0].shape[2])

    @staticmethod
    def _decode(graphs: _Graphs, frames: list[npt.NDArray[Any]], inputs: dict[str, Any], start: int,
                stop: int) -> Audio:
        """Frames [start, stop) of the piece into samples (decoder_parts.FRAME_SAMPLES each)."""
        features, pitch, energy = frames[: len(DECODER_INPUTS)]
        feeds = {
            DECODER_INPUTS[0]: np.ascontiguousarray(features[:, :, start:stop]),
            DECODER_INPUTS[1]: np.ascontiguousarray(pitch[:, 2 * start: 2 * stop]),
            DECODER_INPUTS[2]: np.ascontiguousarray(energy[:, 2 * start: 2 * stop]),
            "style": inputs["style"],
        }
        return np.asarray(graphs.decoder.run(None, feeds)[0], dtype=np.float32).ravel()

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


def split_model(model_path: Path) -> tuple[bytes, bytes] | None:
    """The model cut at DECODER_INPUTS into (encoder, decoder), serialized; None when the graph has no such cut."""
    import onnx
    import onnx.utils

    model = onnx.load(str(model_path))
    produced = {output for node in model.graph.node for output in node.output}
    if not set(DECODER_INPUTS) <= produced:
        log.warning("%s has no %s: it is synthesized whole, never in parts", model_path.name, DECODER_INPUTS[0])
        return None
    extractor = onnx.utils.Extractor(model)
    encoder_outputs = [*DECODER_INPUTS, *([DURATIONS] if DURATIONS in produced else [])]
    encoder = extractor.extract_model([node.name for node in model.graph.input], encoder_outputs)
    decoder = extractor.extract_model([*DECODER_INPUTS, "style"], [output.name for output in model.graph.output])
    for half in (encoder, decoder):
        half.metadata_props.extend(model.metadata_props)  # the vocabulary kokoro-onnx reads
    return encoder.SerializeToString(), decoder.SerializeToString()
