"""Decoding a piece in consecutive parts, so that its first sound is ready after a fraction of the piece's time.

Why: Kokoro makes a piece in two stages. The text encoder and prosody predictor read the whole piece and give, per
frame (600 samples, 25 ms), the aligned text features, the pitch (F0) and the energy (N); on a CPU that is ~5% of
the time. The decoder (iSTFTNet) then turns those frames into samples: ~95% of the time, proportional to the frames
it decodes. Run whole, a piece's first sample waits for its last frame. The decoder's convolutions see only nearby
frames, so it can be run over consecutive frame ranges, each with CONTEXT_FRAMES of neighbours on both sides: the
first part (the piece's first ~0.3-0.7 s of speech) is then ready after ~a third of the whole decoder's time, and
every later part is decoded while the earlier ones play. Prosody still comes from the whole piece (the encoder ran
over all of it), which is what separate text pieces would lose.

Where to cut: the parts are decoded with their own normalisation statistics (the decoder's instance norms and its
dynamic int8 quantization read the whole range they are given), so two parts render the sound near a seam a little
differently, as two separate pieces would. Cuts therefore go where the predicted energy is lowest (a pause, a stop
closure between words), the seam is blended over CROSSFADE_SAMPLES, and the first part skips most of the piece's
leading pad silence (which the endpoint trims anyway). Measured on 5 sentences (tests/endpoint/test_onnx_engine.py
checks the words): Whisper hears the same words in the parted audio as in the whole.

Sizes: each later part may be at most twice the speech already emitted, and at most MAX_PART_FRAMES, so it is
decoded in well under the time the audio before it takes to play (the decoder runs at ~0.2x real time on two cores,
~0.35x on one).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FRAME_SAMPLES = 600
"""Samples per decoder frame (24 kHz: 25 ms); the pitch and energy curves have two values per frame."""
CONTEXT_FRAMES = 8
"""Frames decoded on either side of a part and dropped (200 ms): the decoder's view of the neighbouring sound."""
FIRST_SPEECH_FRAMES = (12, 28)
"""The first part holds this many frames of speech (0.3-0.7 s), cut at the quietest frame in the range."""
MIN_PART_FRAMES = 16
MAX_PART_FRAMES = 64
SEAM_REACH_FRAMES = 16
"""How much longer (400 ms) a part may grow than its window to end on a seamless frame rather than in a vowel."""
SPEECH_ENERGY = 0.0
"""Kokoro's predicted energy (N) is ~-9 over its pad silence and 2-8 over speech: above this, a frame sounds."""
QUIET_ENERGY = 1.0
"""Below this a frame is a pause or a closure between sounds: a seam there is not heard."""
UNVOICED_HZ = 60.0
"""Below this predicted pitch a frame is unvoiced (s, f, t...): noise, whose two renderings blend unheard, where two
renderings of a vowel would differ in phase."""
CROSSFADE_SAMPLES = 240
"""Each seam is a 10 ms linear crossfade between the two parts' renderings of the same samples."""


@dataclass(frozen=True)
class Part:
    """Frames [start, stop) kept from a decoder run over [decode_start, decode_stop)."""

    start: int
    stop: int
    decode_start: int
    decode_stop: int


def frame_energy(energy_curve: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    """Per-frame energy from Kokoro's N curve (two values per frame), averaged."""
    flat = np.asarray(energy_curve, dtype=np.float64).ravel()
    return flat[: len(flat) // 2 * 2].reshape(-1, 2).mean(axis=1)


def plan_parts(energy: npt.NDArray[np.floating], pitch: npt.NDArray[np.floating] | None = None) -> list[Part]:
    """The parts to decode a piece of `len(energy)` frames in; one part (the whole) when cutting gains nothing.

    `energy` and `pitch` (Hz) per frame: see `_cut` for where a cut goes.
    """
    frames = len(energy)
    whole = [Part(0, frames, 0, frames)]
    sounding = np.flatnonzero(np.asarray(energy) > SPEECH_ENERGY)
    if sounding.size == 0:
        return whole
    lead = int(sounding[0])
    low, high = FIRST_SPEECH_FRAMES
    cuts: list[int] = []
    position = lead
    while frames - position > high + MIN_PART_FRAMES:
        cut = _cut(energy, pitch, position + low, position + high, frames - MIN_PART_FRAMES)
        cuts.append(cut)
        position = cut
        low, high = MIN_PART_FRAMES, min(MAX_PART_FRAMES, 2 * (cut - lead))
    if not cuts:
        return whole
    bounds = [0, *cuts, frames]
    parts = [Part(a, b, max(0, a - CONTEXT_FRAMES), min(frames, b + CONTEXT_FRAMES))
             for a, b in itertools.pairwise(bounds)]
    first = parts[0]
    parts[0] = Part(first.start, first.stop, max(0, lead - CONTEXT_FRAMES), first.decode_stop)
    return parts


def _cut(energy: npt.NDArray[np.floating], pitch: npt.NDArray[np.floating] | None, start: int, stop: int,
         limit: int) -> int:
    """The frame to cut at, between `start` and `stop` where possible: the quietest seamless one (quiet, or
    unvoiced) there; else the first seamless one after `stop`, up to SEAM_REACH_FRAMES further (and before
    `limit`); else the quietest frame between `start` and `stop`."""
    reach = max(stop, min(stop + SEAM_REACH_FRAMES, limit))
    level = np.asarray(energy[start:reach], dtype=np.float64)
    seamless = level < QUIET_ENERGY
    if pitch is not None:
        seamless |= np.asarray(pitch[start:reach], dtype=np.float64) < UNVOICED_HZ
    span = stop - start
    if seamless[:span].any():
        return start + int(np.argmin(np.where(seamless[:span], level[:span], np.inf)))
    later = np.flatnonzero(seamless[span:])
    if later.size:
        return stop + int(later[0])
    return start + int(np.argmin(level[:span]))


def decode_parts(decode: Callable[[int, int], npt.NDArray[np.float32]],
                 parts: list[Part]) -> Iterator[npt.NDArray[np.float32]]:
    """The piece's samples, part by part: `decode(start, stop)` renders frames [start, stop).

    Together the parts are as long as the whole piece (frames x FRAME_SAMPLES): the first begins with silence for
    the frames it did not decode, and each seam's samples are the crossfade of both parts' renderings.
    """
    half = CROSSFADE_SAMPLES // 2
    held: npt.NDArray[np.float32] | None = None
    for index, part in enumerate(parts):
        audio = decode(part.decode_start, part.decode_stop)
        expected = (part.decode_stop - part.decode_start) * FRAME_SAMPLES
        if len(audio) != expected:
            raise ValueError(f"the decoder made {len(audio)} samples for {expected // FRAME_SAMPLES} frames, "
                             f"not {expected}")
        last = index == len(parts) - 1
        skipped = part.decode_start - part.start  # frames of the first part's lead silence not decoded
        begin = 0 if index == 0 else (part.start - part.decode_start) * FRAME_SAMPLES - half
        end = len(audio) if last else (part.stop - part.decode_start) * FRAME_SAMPLES - half
        out = audio[begin:end].copy()
        if index == 0 and skipped > 0:
            out = np.concatenate([np.zeros(skipped * FRAME_SAMPLES, np.float32), out])
        if held is not None:
            ramp = np.linspace(0.0, 1.0, len(held), dtype=np.float32)
            out[: len(held)] = held * (1.0 - ramp) + out[: len(held)] * ramp
        if not last:
            held = audio[end: end + 2 * half]
        yield out
