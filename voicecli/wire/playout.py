"""A real-time listener's playback position, as audio arrives: how much is buffered ahead, and how long it stalled.

Why one model for two places: the endpoint's scheduler serves first the session whose listener is closest to
running dry (`Playout.ahead_s`), and `voicecli bench load` reports the stall time a listener would suffer
(`Playout.stalled_s`). Both must mean the same thing by "running dry", so both feed this one class.

The listener starts playing at the first audio's arrival and plays at exactly real time. Audio that arrives
while the buffer still holds some is appended; audio that arrives after the buffer ran out starts playing at once,
and the wait since it ran out is a stall. Pure stdlib: the endpoint container imports it too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Playout:
    """One listener's playback clock. Times are seconds on any one monotonic clock the caller chooses."""

    end: float | None = None
    """When the audio received so far finishes playing (None: nothing received yet)."""
    stalled_s: float = 0.0
    """Total time the player ran dry after the first audio, waiting for more."""
    stalls: int = 0
    """How many times it ran dry."""

    def add(self, at: float, audio_s: float) -> None:
        """`audio_s` seconds of audio arrived at time `at`."""
        if self.end is None:
            self.end = at
        elif at > self.end:
            self.stalled_s += at - self.end
            self.stalls += 1
            self.end = at
        self.end += max(0.0, audio_s)

    def stop(self) -> None:
        """The listener stopped and dropped what it had buffered (a barge-in, an answer abandoned unheard)."""
        self.end = None

    def ahead_s(self, now: float) -> float:
        """Audio buffered ahead of real time at `now`: 0 when nothing was received or the player ran dry."""
        return 0.0 if self.end is None else max(0.0, self.end - now)
