"""Kokoro-82M on PyTorch through the `kokoro` package's KModel: the GPU production path.

Only KModel is used, not KPipeline: the phonemes come from the shared misaki G2P upstream, and KPipeline would
re-chunk and re-phonemize. The voice pack row is chosen exactly as KPipeline does (`pack[len(phonemes) - 1]`: one
style vector per phoneme count). Weights are either the official hexgrad files or the ones
`voicecli.models.kokoro_torch` rebuilds from the int8 ONNX model; both sit in `kokoro_torch_dir(models_dir)`.

Batching (`synthesize_batch`, used by the scheduler's batcher on a GPU): KModel runs in two halves.
- The token side (ALBERT, the duration encoder and its LSTM, the duration projection, the text encoder) sees each
  item's tokens only through an attention mask, `masked_fill` after every convolution and packed LSTM sequences,
  so a padded batch gives every item what it alone would get, up to float rounding. It runs once for the whole
  batch. (KModel's own `forward_with_tokens` calls the duration LSTM on the padded tensor, unpacked: correct for
  one item only, so that one step is packed here.)
- The frame side (the F0/energy predictor and the iSTFTNet decoder) normalises over the whole utterance
  (InstanceNorm in every AdaIN block, reflection padding and interpolation at the ends), so padding an item to a
  longer one changes its audio. It runs per item, in batch order. Its only randomness (the decoder's sine source
  phase and noise) then draws from torch's generator in the same order as that many single calls, so a batch
  seeded like a sequence of single calls draws the very same random tensors and reproduces their audio up to float
  rounding. The padded token side rounds differently (~1e-5), and the decoder's sine source, which accumulates F0
  into phase, amplifies that to a few hundredths sample-wise in places, as much as 1 vs 2 threads or another CPU's
  kernels do; durations, frame energies and spectra match (tests/endpoint/test_torch_engine.py).
On a GPU the token side is many small kernels (12 shared ALBERT layers, three bidirectional LSTMs) whose cost is
launch overhead, not arithmetic, so one launch for B items instead of B is the gain; container/README.md says how
to measure it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from voicecli_endpoint.engines.base import Audio, BatchItem, Engine, TimedAudio, kokoro_torch_dir

MODEL_FILE = "kokoro-v1_0.pth"
CONFIG_FILE = "config.json"
VOICES_DIR = "voices"
REPO_ID = "hexgrad/Kokoro-82M"
"""Only names the model for KModel (which warns without it); nothing is downloaded because every file is local."""


class TorchEngine(Engine):
    """KModel on CUDA when available, else on CPU with `threads` intra-op threads."""

    name: ClassVar[str] = "torch"
    batches: ClassVar[bool] = True

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
        vocab = self._model.vocab  # KModel feeds the symbols it knows, in order, between two boundary tokens
        return TimedAudio(audio, durations, "".join(symbol for symbol in phonemes if symbol in vocab))

    def synthesize_batch(self, items: Sequence[BatchItem]) -> list[Audio]:
        """The audio of every (phonemes, voice, speed) item, in order; one batched pass (see the module docstring)."""
        return [timed.audio for timed in self.synthesize_batch_timed(items)]

    def synthesize_batch_timed(self, items: Sequence[BatchItem]) -> list[TimedAudio]:
        """`synthesize_timed` of every item, the token side of all of them in one pass."""
        import torch

        for phonemes, voice, _ in items:
            self.check_voice(voice)
            if len(phonemes) > len(self._packs[voice]):
                raise ValueError(f"{len(phonemes)} phonemes in one chunk; the most is {len(self._packs[voice])}")
        results: list[TimedAudio | None] = [None] * len(items)
        live = [i for i, (phonemes, _, _) in enumerate(items) if phonemes]
        for i in set(range(len(items))) - set(live):
            results[i] = TimedAudio(np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64))
        if live:
            model = self._model
            vocab: dict[str, int] = model.vocab
            tokens = [[0, *(vocab[p] for p in items[i][0] if p in vocab), 0] for i in live]
            for row in tokens:
                if len(row) > self.context_length:
                    raise ValueError(f"{len(row)} tokens in one chunk; the most is {self.context_length}")
            with torch.no_grad():
                for i, audio, durations in zip(live, *self._forward_batch(tokens, [items[i] for i in live]),
                                               strict=True):
                    results[i] = TimedAudio(audio, durations, "".join(p for p in items[i][0] if p in vocab))
        return [r for r in results if r is not None]

    def _forward_batch(self, tokens: list[list[int]], items: list[BatchItem]
                       ) -> tuple[list[Audio], list[npt.NDArray[np.int64]]]:
        """KModel.forward_with_tokens over a padded batch: token side batched, frame side per item."""
        import torch
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        model, device = self._model, self._model.device
        lengths = torch.tensor([len(row) for row in tokens], dtype=torch.long)
        width = int(lengths.max())
        input_ids = torch.zeros((len(tokens), width), dtype=torch.long)
        for row, ids in enumerate(tokens):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        input_ids = input_ids.to(device)
        ref_s = torch.cat([self._packs[voice][len(phonemes) - 1] for phonemes, voice, _ in items]).to(device)
        speeds = torch.tensor([speed for _, _, speed in items], dtype=torch.float32, device=device)
        text_mask = (torch.arange(width).unsqueeze(0) >= lengths.unsqueeze(1)).to(device)  # True: padding

        bert_dur = model.bert(input_ids, attention_mask=(~text_mask).int())
        d_en = model.bert_encoder(bert_dur).transpose(-1, -2)
        s = ref_s[:, 128:]
        d = model.predictor.text_encoder(d_en, s, lengths, text_mask)
        packed = pack_padded_sequence(d, lengths, batch_first=True, enforce_sorted=False)
        x, _ = pad_packed_sequence(model.predictor.lstm(packed)[0], batch_first=True, total_length=width)
        duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speeds.unsqueeze(1)
        pred_dur = torch.round(duration).clamp(min=1).long()
        t_en = model.text_encoder(input_ids, lengths, text_mask)

        audios: list[Audio] = []
        durations: list[npt.NDArray[np.int64]] = []
        for row, length in enumerate(lengths.tolist()):
            dur = pred_dur[row, :length]
            indices = torch.repeat_interleave(torch.arange(length, device=device), dur)
            alignment = torch.zeros((length, indices.shape[0]), device=device)
            alignment[indices, torch.arange(indices.shape[0], device=device)] = 1
            alignment = alignment.unsqueeze(0)
            en = d[row : row + 1, :length].transpose(-1, -2) @ alignment
            f0, noise = model.predictor.F0Ntrain(en, s[row : row + 1])
            asr = t_en[row : row + 1, :, :length] @ alignment
            audio = model.decoder(asr, f0, noise, ref_s[row : row + 1, :128]).squeeze()
            audios.append(np.asarray(audio.cpu().numpy(), dtype=np.float32).ravel())
            durations.append(np.asarray(dur.cpu().numpy(), dtype=np.int64).ravel())
        return audios, durations
