"""Double talk: is someone speaking over the answer's echo? Told by the coherence of the microphone with the far end.

Why: over a loud echo the user's voice does not reach the voice detector. The canceller's output holds it down in
double talk (AEC3's suppressor, and under a +6 dB echo the linear filter's residual as well): in bench duplex the
interruptions spoken mostly over the answer's echo were missed (3-4 of 18 per run), and tuning AEC3's suppressor
recovered one in seven on the replay while letting echo through (results/bench/aec3-tuning-20261206). This module asks
another question of the raw microphone: is what it hears the far end alone, through the room? A room is close to
a linear filter, so over a few tens of ms the echo stays coherent with what the speaker played; a second voice breaks
that coherence in the bands it fills.

Why a search over lags: the coherence of a 32 ms frame falls fast when the far end is off the echo (on the kept
recordings, 5 ms off made 10 times the flags in the echo alone, 10 ms off 55 times), and live the far end is only
as right as the player's DAC times and the canceller's bulk delay, followed in steps of a few ms and moved by each
restart of the output stream (one live run with the far end at the bulk delay held the answer ~20 more times in 36
answers). Each frame therefore takes the best coherence over LAGS around the bulk delay: the echo alone is coherent
at one of them, a voice under it at none. On the kept recordings of two runs (results/bench/double-talk-lags-20261206/
lags.py: 19.4 min of echo alone, 7 double-talk interruptions), with the far end at the true delay and 10 or 15 ms
either side of it, the detector flagged the echo alone 2-4 times and told 5-7 of the 7 within their first half
second; without the search, 13 flags at the true delay and 164-923 off it.

Live it is off by default (audio.echo_double_talk): in three bench duplex runs the holds without the user were 14, 5
and 15 per 36 answers (5-11 without it), more than the replay of their recordings makes, with the far end within
10 ms of the echo (the canceller's dump, voicecli.audio.echo_dump); and it caught 1 of 3 interruptions in double
talk (README, "Double talk, measured"). Two later runs with it on (duplex-20261206-dtd10, duplex-20261207-dtd-default)
paused as rarely as their replays, once per run, but told the two double-talk interruptions it flagged 0.92-0.99 s
in, as their last word ended, and stopped none: under a +6 dB echo a loud syllable of the answer keeps the
microphone ~0.9 coherent (one trace: told where the answer fell quieter; README, "Double talk, on").

The same measure asked of the canceller's output says whether that is echo the canceller let through (coherent
with the far end) rather than a voice (voicecli.audio.echo_cancel.LEAK_COHERENCE): a second detector is fed the
output, and `scores` keeps each frame's best coherence for both questions.

What a flag means: "not the echo alone" (a voice, a cough, a door), never which words. The listener holds the
answer's voice on it (voicecli.listen.listener): the echo stops, the rest of the user's words reach the voice detector
clean, and it confirms the barge-in or lets the hold run out. A loudspeaker that distorts lowers the echo's own
coherence (more flags, each a pause); the synthetic room of the bench is linear.

How: 32 ms Hann frames every 16 ms, bins 300-3,400 Hz (where voices carry their energy); for each lag, cross- and
auto-spectra smoothed exponentially (SMOOTHING: ~80 ms); per frame and lag, the coherence of each bin weighted by the
microphone's power there, and the best lag's. A frame counts only while the far end plays and the microphone hears
something. The far end is fed SEARCH_MS ahead of the echo's delay, so the lags on either side come from what the
detector already holds.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE

Audio = NDArray[np.float32]

FRAME: Final = 512
"""Samples per analysis frame (32 ms at 16 kHz)."""
HOP: Final = 256
SMOOTHING: Final = 0.8
"""Weight of the past in the smoothed spectra, per hop (~80 ms memory)."""
BAND_HZ: Final = (300, 3400)
SEARCH_MS: Final = 20
"""How far either side of the echo's delay the lags reach."""
LAG_STEP_MS: Final = 4
"""Between lags: at most 2 ms off the best one, which costs a 32 ms frame little of its coherence."""
WARMUP_HOPS: Final = 5
"""Frames not judged after a reset once the far end's history is filled: the smoothed spectra's memory (~80 ms)."""
FAR_DBFS: Final = -45.0
"""The far end counts as playing above this level (per frame)."""
HEARD_DBFS: Final = -50.0
"""The microphone counts as hearing something above this level (per frame)."""
LOW_COHERENCE: Final = 0.25
"""A frame whose best lag stays below this coherence is 'not the echo alone'."""
WINDOW_FRAMES: Final = 31
"""The frames a flag looks back over (0.5 s)."""
LOW_FRAMES: Final = 3
"""Frames below LOW_COHERENCE within WINDOW_FRAMES that flag double talk. Chosen on the same recordings with a batch
form of lags.py counting 0.5 s windows, the far end at the true delay: 3 flagged 3 of 2,163 half seconds of the echo
alone and 6 of the 7 double-talk interruptions; 4 flagged 0 and 5 of 7; LOW_COHERENCE 0.30 with 4 frames, 4 and 6
of 7, but 11-14 with the far end 10-15 ms off."""


def _power_dbfs(frames: NDArray[np.float32]) -> NDArray[np.float64]:
    return np.asarray(10 * np.log10(np.mean(np.square(frames, dtype=np.float64), axis=-1) + 1e-12))


class DoubleTalkDetector:
    """Feed the capture and the far end `lead` samples (`search_ms`) ahead of its echo, block by block; `near_end`
    says whether the latest half second holds more than the echo alone (see the module docstring). `search_ms` 0
    takes the far end at the echo's delay alone (how it was first tried live)."""

    def __init__(self, rate: int = SPEECH_RATE, search_ms: int = SEARCH_MS) -> None:
        if rate != SPEECH_RATE:
            raise ValueError(f"the double-talk detector runs at {SPEECH_RATE} Hz, got {rate}")
        self.lead = search_ms * rate // 1000
        """Samples the far end is fed ahead of the echo's delay."""
        step = LAG_STEP_MS * rate // 1000
        self._offsets = np.arange(0, 2 * self.lead + 1, step)  # into the far end's history: lead is the bulk delay
        self._warmup = -(-(2 * self.lead + FRAME) // HOP) + WARMUP_HOPS
        self._window = np.hanning(FRAME).astype(np.float32)
        self._lo, self._hi = (round(hz / rate * FRAME) for hz in BAND_HZ)
        self.scores: deque[float | None] = deque(maxlen=WINDOW_FRAMES)
        """The latest frames' best coherence over the lags, newest last; None for a frame that did not count (the
        far end silent, what is fed quiet, or the detector still warming up)."""
        self.reset()

    def reset(self) -> None:
        """Forget everything: after the far end's alignment changed by more than the search, or a restart."""
        bins, lags = self._hi - self._lo, len(self._offsets)
        self._capture = np.zeros(0, np.float32)
        self._far = np.zeros(2 * self.lead, np.float32)  # the far end's history: 2 * lead older than the capture
        self._sxy = np.zeros((lags, bins), np.complex128)
        self._sxx = np.full(bins, 1e-12)
        self._syy = np.full((lags, bins), 1e-12)
        self.scores.clear()
        self.frames = 0
        """Frames analysed since the last reset."""

    @property
    def near_end(self) -> bool:
        """True while LOW_FRAMES of the latest WINDOW_FRAMES frames were playing, heard, and incoherent."""
        return sum(score is not None and score < LOW_COHERENCE for score in self.scores) >= LOW_FRAMES

    def feed(self, capture: Audio, far: Audio) -> list[float | None]:
        """One block of the microphone and of the far end `lead` samples ahead of its echo (equal lengths). Returns
        the scores of the frames it completed (as `scores` keeps them; none while a frame is still filling)."""
        if len(capture) != len(far):
            raise ValueError(f"capture and far end differ in length: {len(capture)} vs {len(far)}")
        self._capture = np.concatenate([self._capture, np.asarray(capture, np.float32)])
        self._far = np.concatenate([self._far, np.asarray(far, np.float32)])
        count = (len(self._capture) - FRAME) // HOP + 1 if len(self._capture) >= FRAME else 0
        if count <= 0:
            return []
        mic = np.lib.stride_tricks.sliding_window_view(self._capture, FRAME)[::HOP][:count] * self._window
        spectra_x = np.fft.rfft(mic, axis=1)[:, self._lo : self._hi]
        # the far end at each lag, frame by frame: (lags, frames, FRAME); offset `lead` is the echo's delay
        far_frames = np.lib.stride_tricks.sliding_window_view(self._far, FRAME)
        ref = np.stack([far_frames[offset :: HOP][:count] for offset in self._offsets]) * self._window
        spectra_y = np.fft.rfft(ref, axis=2)[:, :, self._lo : self._hi]
        playing = _power_dbfs(ref[len(self._offsets) // 2]) > FAR_DBFS
        counted = playing & (_power_dbfs(mic) > HEARD_DBFS)
        completed: list[float | None] = []
        for k in range(count):
            x, y = spectra_x[k], spectra_y[:, k]
            power_x = np.abs(x) ** 2
            self._sxy = SMOOTHING * self._sxy + (1 - SMOOTHING) * x * np.conj(y)
            self._sxx = SMOOTHING * self._sxx + (1 - SMOOTHING) * power_x
            self._syy = SMOOTHING * self._syy + (1 - SMOOTHING) * np.abs(y) ** 2
            # floored: after long exact silence the smoothed powers underflow to 0 (a canceller's output can be)
            coherence = np.abs(self._sxy) ** 2 / np.maximum(self._sxx * self._syy, 1e-300)
            best = float(np.max(coherence @ power_x) / (np.sum(power_x) + 1e-12))
            settled = self.frames >= self._warmup  # the far end's history and the smoothed spectra are filled
            completed.append(best if settled and counted[k] else None)
            self.frames += 1
        self.scores.extend(completed)
        used = count * HOP
        self._capture, self._far = self._capture[used:], self._far[used:]
        return completed
