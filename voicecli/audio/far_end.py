"""The far-end reference: exactly what the speaker was handed, placed on the monotonic clock at the time it reached
the DAC, at the speech side's 16 kHz mono. The echo canceller reads it to learn what the microphone will hear back.

Why here (audio/) and not in playback/ or listen/: the player writes it and the capture path reads it, and those
two are siblings that never import each other; the shared type goes down a layer.

Why a pending deque plus a ring: ``push`` runs on PortAudio's audio thread, which must not block or do real work, so
it only copies the block (10 ms: a few hundred samples) and appends it with its DAC time to a bounded deque (append
and popleft are atomic in CPython; no lock the audio thread could wait on). The reader (the capture path, one
thread) moves pending blocks into a 16 kHz ring, resampling there with the shared streaming resampler.

Why continuity instead of each block's own timestamp: DAC times carry scheduling jitter of a few ms; placing every
block at its own stamp would tear the reference (gaps, overlaps) and an echo canceller adapts to a continuous
signal. Blocks are appended back to back, and the timeline is re-anchored to the stamp only when it disagrees by
more than ``REANCHOR_S`` (the stream was stopped and restarted on barge-in, a callback was lost).
Time with no block (the stream stopped) reads as silence, which is what was played.

Why the timeline follows the DAC times over the latest RELATION_S instead of the first block's: a sound card's clock
is not the monotonic clock (cards are off by tens to hundreds of ppm). Measured on the private PulseAudio: the
capture delivers ~242 ppm more samples than the monotonic clock says (235-243 ppm in all nine sessions of three
bench duplex runs), while the capture and what the player handed on keep one lag to the sample (the echo dumps).
A timeline fixed at the first block drifts from a stream that counts a fast card's samples and re-anchors by
REANCHOR_S (20 ms) whenever the drift reaches it (every ~83 s unbroken at 242 ppm). So the monotonic time of index 0
is the median, over the blocks of the latest RELATION_S, of each block's DAC time less its place: it moves with the
card's clock by a fraction of a sample per block and only a real break (a restart, a lost callback) re-anchors.
``stretches`` counts those breaks. Within one, the capture path holds its own timeline still (it counts the same
card's samples; voicecli.audio.echo_cancel) and lays it again at the next. A restarted stream's stretch is placed by
its first block's DAC time, which is where it plays: measured on the private PulseAudio over 20 restarts
(results/bench/stretch-placement-20261206), the first 40 blocks all put the stretch's start within 1.0 ms of where
the first did, and the audio came back on the speaker's monitor where its DAC time said, to 0.15 ms.

Why ``cut``: a barge-in aborts the stream, and what the device still held, already pushed here with DAC times
still to come, is discarded, never played. Left in, it is a reference for an echo that never comes, and the
restarted stream's first block, whose DAC time may land within REANCHOR_S of where that audio ends, is appended
back to back there instead of at its own time. Measured on the private PulseAudio (idle but for a bench): the
reference ended 14 ms after the speaker fell silent without the cut, 1.4 ms with it; the next answer's onset in the
reference was 3.8-8.9 ms after the heard one without, -2.0..+6.7 ms with. Small (AEC3 tracks a few ms by itself),
but the reference must be what was played. ``cut(at)`` says nothing was played from `at` on.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.resample import StreamResampler

__all__ = ["REANCHOR_S", "RELATION_S", "FarEndReference"]

Audio = NDArray[np.float32]

REANCHOR_S: Final = 0.02
"""A block whose DAC time is further than this from where the previous block ended starts a new stretch there."""

RELATION_S: Final = 2.0
"""The latest DAC times the timeline's relation to the monotonic clock is the median over (see the module docstring):
long enough to smooth the stamps' jitter, short enough that the card's drift within it (~0.5 ms here) is small."""

_CUT: Final = 0
"""The rate of a pending entry that is a cut (``cut``), not a block."""


class FarEndReference:
    """What was played and when it was audible: ``push`` from the player's callback, ``read`` from the capture path.

    - keep_s: how much history the ring holds (the capture path reads up to its delay search range back).
    - max_pending: blocks held for the reader; older ones are shed if nobody reads (no capture path running).
    """

    def __init__(self, keep_s: float = 4.0, max_pending: int = 1000) -> None:
        self.rate = SPEECH_RATE
        self._pending: deque[tuple[float, int, Audio]] = deque(maxlen=max_pending)
        self._ring = np.zeros(round(keep_s * self.rate), np.float32)
        self._origin: float | None = None  # monotonic time of ring index 0 by the latest blocks (`_relate`)
        self._places: deque[tuple[float, float]] = deque()  # (DAC time, DAC time less its place) per block
        self._end = 0  # absolute index one past the newest sample written
        self._resampler: StreamResampler | None = None
        self.pushed = 0
        """Blocks pushed so far (the player's callbacks that handed audio to the device)."""
        self._reanchors = 0
        self._stretches = 0
        self._cuts = 0
        self._cut_index: int | None = None
        self._after_cut = False  # the next block begins a stretch at its own time

    # -- the audio thread ----------------------------------------------------------------------------------------

    def push(self, block: NDArray[np.float32], rate: int, dac_time: float) -> None:
        """One block as handed to the device ((frames,) or (frames, channels) at `rate`), first sample at `dac_time`.

        Called on the audio thread: copies and appends, nothing else.
        """
        mono = block.mean(axis=1, dtype=np.float32) if block.ndim == 2 and block.shape[1] > 1 else block.reshape(-1)
        self._pending.append((dac_time, rate, np.array(mono, dtype=np.float32)))
        self.pushed += 1

    def cut(self, at: float) -> None:
        """Nothing pushed for monotonic time `at` or later was played (the stream was aborted at `at`, its buffer
        discarded). Call it between stopping the stream and starting it again: it is queued behind the blocks
        pushed before it, so the reader applies it before the restarted stream's blocks."""
        self._pending.append((at, _CUT, np.zeros(0, np.float32)))

    # -- the reader ----------------------------------------------------------------------------------------------

    def _absorb(self) -> None:
        while self._pending:
            dac_time, rate, samples = self._pending.popleft()
            self._place(dac_time, rate, samples)

    def _place(self, dac_time: float, rate: int, samples: Audio) -> None:
        if rate == _CUT:
            self._cut(dac_time)
            return
        if self._origin is None:
            self._origin = dac_time
            self._stretches += 1
        stamp = round((dac_time - self._origin) * self.rate)
        cut, self._after_cut = self._after_cut, False
        if cut or abs(stamp - self._end) > REANCHOR_S * self.rate:
            if self._resampler is not None:
                self._resampler.reset()
            if cut:  # a restart: placed by its own time (never over the cut), a stretch the cut already counted
                stamp = max(stamp, self._end)
            elif self._end > 0:
                self._reanchors += 1
                self._stretches += 1
            if stamp > self._end:
                self._write(np.zeros(stamp - self._end, np.float32))  # nothing was played meanwhile
            self._end = stamp
        self._relate(dac_time, self._end)
        if rate != self.rate:
            if self._resampler is None or self._resampler.in_rate != rate:
                self._resampler = StreamResampler(rate, self.rate)
            samples = self._resampler.process(samples)
        self._write(samples)

    def _relate(self, dac_time: float, place: int) -> None:
        """Take the block placed at absolute index `place` into the timeline's relation to the monotonic clock."""
        places = self._places
        places.append((dac_time, dac_time - place / self.rate))
        while places[0][0] < dac_time - RELATION_S:
            places.popleft()
        self._origin = float(np.median([origin for _, origin in places]))

    def _cut(self, at: float) -> None:
        """Silence from `at` to the newest sample, which becomes `at`: the next block begins a stretch at its own
        time, however close to `at` (never before it)."""
        if self._origin is None:
            return
        self._cuts += 1
        self._stretches += 1
        stamp = max(round((at - self._origin) * self.rate), self._end - len(self._ring))
        self._cut_index = min(stamp, self._end)
        self._after_cut = True
        if stamp < self._end:
            dropped = self._end - stamp
            self._end = stamp
            self._write(np.zeros(dropped, np.float32))
            self._end = stamp
            if self._resampler is not None:
                self._resampler.reset()

    def _write(self, samples: Audio) -> None:
        size = len(self._ring)
        if len(samples) > size:
            self._end += len(samples) - size
            samples = samples[-size:]
        n = len(samples)
        start = self._end % size
        first = min(n, size - start)
        self._ring[start : start + first] = samples[:first]
        self._ring[: n - first] = samples[first:]
        self._end += n

    def index(self, at: float) -> int | None:
        """The absolute 16 kHz sample index of monotonic time `at` (None before anything was played)."""
        self._absorb()
        return None if self._origin is None else round((at - self._origin) * self.rate)

    def read(self, at: float, n: int) -> Audio:
        """`n` samples of what was audible from monotonic time `at` on; silence where nothing was (or is kept)."""
        start = self.index(at)
        return np.zeros(n, np.float32) if start is None else self.read_index(start, n)

    def read_index(self, start: int, n: int) -> Audio:
        """`n` samples from absolute index `start` (see ``index``); silence outside what the ring holds."""
        self._absorb()
        out = np.zeros(n, np.float32)
        size = len(self._ring)
        lo, hi = max(start, self._end - size, 0), min(start + n, self._end)
        if hi > lo:
            idx = np.arange(lo, hi) % size
            out[lo - start : hi - start] = self._ring[idx]
        return out

    @property
    def reanchors(self) -> int:
        """Times the timeline was re-anchored to a block's DAC time: a stream restarted without a ``cut``, a lost
        callback (a restart after a cut is placed by its own time without counting here)."""
        self._absorb()
        return self._reanchors

    @property
    def stretches(self) -> int:
        """Continuous stretches begun so far: the first block, each re-anchor and each cut. Within one, the samples
        follow each other on the card's clock; between two, the timeline was placed by the monotonic clock."""
        self._absorb()
        return self._stretches

    @property
    def cuts(self) -> int:
        """Cuts applied so far (``cut``: each one a stream aborted and restarted after something was played)."""
        self._absorb()
        return self._cuts

    @property
    def cut_index(self) -> int | None:
        """The absolute index (see ``index``) from which the latest cut says nothing was played: what comes at or
        after it was played by the restarted stream (None before any cut)."""
        self._absorb()
        return self._cut_index

    @property
    def end(self) -> int:
        """The absolute index (see ``index``) one past the newest sample handed to the device."""
        self._absorb()
        return self._end

    @property
    def played_until(self) -> float | None:
        """Monotonic time just past the newest sample known to have been handed to the device."""
        self._absorb()
        return None if self._origin is None else self._origin + self._end / self.rate
