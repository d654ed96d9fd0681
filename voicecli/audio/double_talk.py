"""Double talk: is someone speaking over the answer's echo? Told by the coherence of the microphone with the far end.

Why: over a loud echo the user's voice does not reach the voice detector. The canceller's output holds it down in
double talk (AEC3's suppressor, and under a +6 dB echo the linear filter's residual as well): in bench duplex the
interruptions spoken mostly over the answer's echo were missed (3-4 of 18 per run), and tuning AEC3's suppressor
recovered one in seven on the replay while letting echo through (results/bench/aec3-tuning-20261206). This module asks
another question of the raw microphone: is what it hears the far end alone, through the room? A room is close to
a linear filter, so over a few tens of ms the echo stays coherent with what the speaker played; a second voice breaks
that coherence in the bands it fills. On the kept recordings of two runs, half seconds with at least LOW_FRAMES
frames below LOW_COHERENCE flagged 6 of the 7 double-talk interruptions within their first half second, and 5 of
the 2,163 half seconds of echo alone (results/bench/aec3-tuning-20261206/coherence.py).

What a flag means: "not the echo alone" (a voice, a cough, a door), never which words. The listener holds the
answer's voice on it (voicecli.listen.listener): the echo stops, the rest of the user's words reach the voice detector
clean, and it confirms the barge-in or lets the hold run out. A loudspeaker that distorts lowers the echo's own
coherence (more flags, each a pause); the synthetic room of the bench is linear.

How: 32 ms Hann frames every 16 ms, bins 300-3,400 Hz (where voices carry their energy); cross- and auto-spectra
smoothed exponentially (SMOOTHING: ~80 ms); per frame, the coherence of each bin weighted by the microphone's power
there. A frame counts only while the far end plays and the microphone hears something. The far end must be aligned
with the echo (the canceller's bulk delay): a misalignment near a frame's length destroys the coherence.
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
FAR_DBFS: Final = -45.0
"""The far end counts as playing above this level (per frame)."""
HEARD_DBFS: Final = -50.0
"""The microphone counts as hearing something above this level (per frame)."""
LOW_COHERENCE: Final = 0.25
"""A frame below this coherence is 'not the echo alone'. Echo-only frames in the replay: 1 % below 0.28."""
WINDOW_FRAMES: Final = 31
"""The frames a flag looks back over (0.5 s)."""
LOW_FRAMES: Final = 4
"""Frames below LOW_COHERENCE within WINDOW_FRAMES that flag double talk (3: 20 flags in the 2,163 echo-only half
seconds of the replay; 4: 5; 5: 1, and 4 of the 7 double-talk interruptions instead of 6)."""


def _power_dbfs(frames: NDArray[np.float32]) -> NDArray[np.float64]:
    return np.asarray(10 * np.log10(np.mean(np.square(frames, dtype=np.float64), axis=-1) + 1e-12))


class DoubleTalkDetector:
    """Feed the capture and the far end aligned with its echo, block by block; `near_end` says whether the latest
    half second holds more than the echo alone (see the module docstring)."""

    def __init__(self, rate: int = SPEECH_RATE) -> None:
        if rate != SPEECH_RATE:
            raise ValueError(f"the double-talk detector runs at {SPEECH_RATE} Hz, got {rate}")
        self._window = np.hanning(FRAME).astype(np.float32)
        self._lo, self._hi = (round(hz / rate * FRAME) for hz in BAND_HZ)
        self._lows: deque[bool] = deque(maxlen=WINDOW_FRAMES)
        self.reset()

    def reset(self) -> None:
        """Forget everything: after the far end's alignment changed by more than a frame, or a restart."""
        bins = self._hi - self._lo
        self._capture = np.zeros(0, np.float32)
        self._far = np.zeros(0, np.float32)
        self._sxy = np.zeros(bins, np.complex128)
        self._sxx = np.full(bins, 1e-12)
        self._syy = np.full(bins, 1e-12)
        self._lows.clear()
        self.frames = 0
        """Frames analysed since the last reset."""

    @property
    def near_end(self) -> bool:
        """True while LOW_FRAMES of the latest WINDOW_FRAMES frames were playing, heard, and incoherent."""
        return sum(self._lows) >= LOW_FRAMES

    def feed(self, capture: Audio, far: Audio) -> None:
        """One block of the microphone and the far end aligned with its echo (equal lengths)."""
        if len(capture) != len(far):
            raise ValueError(f"capture and far end differ in length: {len(capture)} vs {len(far)}")
        self._capture = np.concatenate([self._capture, np.asarray(capture, np.float32)])
        self._far = np.concatenate([self._far, np.asarray(far, np.float32)])
        count = (len(self._capture) - FRAME) // HOP + 1 if len(self._capture) >= FRAME else 0
        if count <= 0:
            return
        mic = np.lib.stride_tricks.sliding_window_view(self._capture, FRAME)[::HOP][:count] * self._window
        ref = np.lib.stride_tricks.sliding_window_view(self._far, FRAME)[::HOP][:count] * self._window
        spectra_x = np.fft.rfft(mic, axis=1)[:, self._lo : self._hi]
        spectra_y = np.fft.rfft(ref, axis=1)[:, self._lo : self._hi]
        counted = (_power_dbfs(ref) > FAR_DBFS) & (_power_dbfs(mic) > HEARD_DBFS)
        for x, y, active in zip(spectra_x, spectra_y, counted, strict=True):
            self._sxy = SMOOTHING * self._sxy + (1 - SMOOTHING) * x * np.conj(y)
            power_x = np.abs(x) ** 2
            self._sxx = SMOOTHING * self._sxx + (1 - SMOOTHING) * power_x
            self._syy = SMOOTHING * self._syy + (1 - SMOOTHING) * np.abs(y) ** 2
            coherence = np.abs(self._sxy) ** 2 / (self._sxx * self._syy)
            mean = float(np.sum(coherence * power_x) / (np.sum(power_x) + 1e-12))
            self._lows.append(bool(active) and mean < LOW_COHERENCE)
            self.frames += 1
        used = count * HOP
        self._capture, self._far = self._capture[used:], self._far[used:]
