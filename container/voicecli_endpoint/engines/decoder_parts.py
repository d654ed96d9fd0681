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
differently, as two separate pieces would. Cuts therefore go at a quiet frame (a pause, a stop closure, ~25 dB
below the vowels) or an unvoiced one where the window has one (see `_cut`), the seam is blended over
CROSSFADE_SAMPLES, and the first part skips most of the piece's
leading pad silence (which the endpoint trims anyway); no cut goes into the trailing pad silence. Measured on 12
sentences: Whisper (tiny.en and base) hears the same words in the parted audio as in the whole
(tests/endpoint/test_onnx_engine.py checks one); in 40 mel bands the two differ by ~3.5 dB on average, against
~0.5 dB for the model's own small input variations: a slightly different rendering, as separate pieces would be.

Sizes: a later part must be decoded before the speech sent so far has played. The decoder takes ~5.5 ms per frame on
two idle cores (the frame plays for 25 ms); planned for DECODE_MS_PER_FRAME, 1.6x that (another session's work, the
final transcription), a part is at most 25 / DECODE_MS_PER_FRAME times the speech already sent, less its context
frames, and at most MAX_PART_FRAMES. Measured before this bound, with later parts up to twice the speech sent: one
answer in ten ran dry for ~50 ms (five 10 ms callbacks) in the turns bench.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voicecli.wire.protocol import SAMPLE_RATE

FRAME_SAMPLES = 600
"""Samples per decoder frame; the pitch and energy curves have two values per frame."""
FRAME_MS = FRAME_SAMPLES * 1000 / SAMPLE_RATE
"""How long a frame plays: 25 ms."""
CONTEXT_FRAMES = 8
"""Frames decoded on either side of a part and dropped (200 ms): the decoder's view of the neighbouring sound."""
FIRST_SPEECH_FRAMES = (12, 30)
"""The first part holds this many frames of speech (0.3-0.75 s), more when it must reach a seamless frame."""
MIN_PART_FRAMES = 16
MAX_PART_FRAMES = 64
SEAM_REACH_FRAMES = 16
"""How much longer (400 ms) the first part may grow than its window to end on a seamless frame rather than in a
vowel (a longer first part only delays the first sound a little; a longer later one could make the listener wait)."""
DECODE_MS_PER_FRAME = 9.0
"""The decoder's cost per frame that later parts are sized for (see the module docstring)."""
SPEECH_ENERGY = 0.0
"""Kokoro's predicted energy (N) is ~-9 over its pad silence and 2-8 over speech: above this, a frame sounds."""
QUIET_ENERGY = 2.0
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
    lead, end = int(sounding[0]), int(sounding[-1]) + 1
    low, high = FIRST_SPEECH_FRAMES
    reach = SEAM_REACH_FRAMES
    cuts: list[int] = []
    position = lead
    while end - position > high:  # the speech left does not fit in one more part
        cut = _cut(energy, pitch, position + low, position + high, min(position + high + reach, end))
        cuts.append(cut)
        position = cut
        sent_ms = (cut - lead) * FRAME_MS
        low, reach = MIN_PART_FRAMES, 0
        high = max(low + 1, min(MAX_PART_FRAMES, int(sent_ms / DECODE_MS_PER_FRAME) - 2 * CONTEXT_FRAMES))
    if not cuts:
        return whole
    bounds = [0, *cuts, frames]
    parts = [Part(a, b, max(0, a - CONTEXT_FRAMES), min(frames, b + CONTEXT_FRAMES))
             for a, b in itertools.pairwise(bounds)]
    first = parts[0]
    parts[0] = Part(first.start, first.stop, max(0, lead - CONTEXT_FRAMES), first.decode_stop)
    return parts


def _cut(energy: npt.NDArray[np.floating], pitch: npt.NDArray[np.floating] | None, start: int, stop: int,
         reach: int) -> int:
    """The frame to cut at, between `start` and `stop` where possible: the quietest seamless one (quiet, or
    unvoiced) there; else the first seamless one after `stop` and before `reach`; else the quietest frame between
    `start` and `stop`."""
    reach = max(stop, reach)
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
