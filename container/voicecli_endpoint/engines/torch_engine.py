"""Kokoro-82M on PyTorch through the `kokoro` package's KModel: the GPU production path.

Only KModel is used, not KPipeline: the phonemes come from the shared misaki G2P upstream, and KPipeline would
re-chunk and re-phonemize. The voice pack row is chosen exactly as KPipeline does (`pack[len(phonemes) - 1]`: one
style vector per phoneme count). Weights are either the official hexgrad files or the ones
`voicecli.models.kokoro_torch` rebuilds from the int8 ONNX model; both sit in `kokoro_torch_dir(models_dir)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from voicecli_endpoint.engines.base import Audio, Engine, kokoro_torch_dir

MODEL_FILE = "kokoro-v1_0.pth"
CONFIG_FILE = "config.json"
VOICES_DIR = "voices"
REPO_ID = "hexgrad/Kokoro-82M"
"""Only names the model for KModel (which warns without it); nothing is downloaded because every file is local."""


@dataclass(frozen=True)
class TimedAudio:
    """Audio plus the predicted duration of every input token, in model frames (600 samples = 25 ms at speed 1).

    `durations` has one entry per token KModel fed the model: a boundary token, each phoneme in the vocabulary,
    a boundary token. The parity test compares them with the ONNX model's.
    """

    audio: Audio
    durations: npt.NDArray[np.int64]


class TorchEngine(Engine):
    """KModel on CUDA when available, else on CPU with `threads` intra-op threads."""

    name: ClassVar[str] = "torch"

    def __init__(self, models_dir: Path, threads: int = 1, device: str | None = None) -> None:
        import torch
        from kokoro.model import KModel

        directory = kokoro_torch_dir(models_dir)
        model_path, config_path = directory / MODEL_FILE, directory / CONFIG_FILE
        voice_paths = sorted((directory / VOICES_DIR).glob("*.pt"))
        for path in (model_path, config_path):
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing; run `voicecli models install --only kokoro-torch`")
        if not voice_paths:
            raise FileNotFoundError(f"no voices under {directory / VOICES_DIR}; run "
                                    "`voicecli models install --only kokoro-torch`")
        torch.set_num_threads(max(1, threads))
        self._device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = KModel(repo_id=REPO_ID, config=str(config_path), model=str(model_path))
        self._model: Any = model.to(self._device).eval()
        # Voice packs are small (0.5 MB each): keep them all on the device, ready for the first request.
        self._packs: dict[str, Any] = {
            path.stem: torch.load(path, map_location=self._device, weights_only=True) for path in voice_paths
        }
        self._voices = tuple(sorted(self._packs))
        self.threads = threads

    @property
    def voices(self) -> tuple[str, ...]:
        return self._voices

    @property
    def device(self) -> str:
        return str(self._model.device)

    @property
    def context_length(self) -> int:
        """Most tokens one call takes, boundary tokens included (512 for Kokoro v1.0)."""
        return int(self._model.context_length)

    def synthesize_phonemes(self, phonemes: str, voice: str, speed: float) -> Audio:
        return self.synthesize_timed(phonemes, voice, speed).audio

    def synthesize_timed(self, phonemes: str, voice: str, speed: float) -> TimedAudio:
        """Synthesize and also return the predicted per-token durations."""
        self.check_voice(voice)
        if not phonemes:
            return TimedAudio(np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64))
        pack = self._packs[voice]
        if len(phonemes) > len(pack):
            raise ValueError(f"{len(phonemes)} phonemes in one chunk; the most is {len(pack)}")
        output = self._model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
        audio = np.asarray(output.audio.numpy(), dtype=np.float32).ravel()
        durations = np.asarray(output.pred_dur.numpy(), dtype=np.int64).ravel()
        return TimedAudio(audio, durations)
