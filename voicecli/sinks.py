"""Where decoded answer audio goes: the AudioSink interface and the sink that keeps audio instead of playing it.

Its own module so that the pipeline (which writes to a sink), the speaker (one sink) and the front ends (which
choose one) depend on it and not on each other.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from voicecli.audio.pcm import Samples


class AudioSink(Protocol):
    """Where decoded answer audio goes: the speaker (playback.Player), a file, or nowhere (--mute)."""

    def write(self, samples: Samples, answer_id: str) -> None: ...

    def first_played(self, answer_id: str) -> float | None:
        """Monotonic time the first audible sample of this answer reached the device, if it has."""
        ...

    def stop(self) -> None:
        """Silence at once and drop what is buffered (barge-in)."""
        ...

    def drained(self) -> bool:
        """True when everything written has been played."""
        ...

    def finish(self, answer_id: str) -> None:
        """No more audio will come for this answer (so a gap after it is not an underrun)."""
        ...

    def close(self) -> None: ...


class CollectingSink:
    """Keeps the audio instead of playing it (for --out and --mute): first_played is when it was first written."""

    def __init__(self) -> None:
        self.chunks: list[Samples] = []
        self._first: dict[str, float] = {}

    def write(self, samples: Samples, answer_id: str) -> None:
        self._first.setdefault(answer_id, time.monotonic())
        self.chunks.append(samples)

    def first_played(self, answer_id: str) -> float | None:
        return self._first.get(answer_id)

    def stop(self) -> None:
        pass

    def drained(self) -> bool:
        return True

    def finish(self, answer_id: str) -> None:
        pass

    def close(self) -> None:
        pass

    def audio(self) -> Samples:
        return np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)
