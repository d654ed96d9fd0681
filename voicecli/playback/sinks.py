"""Where decoded answer audio goes: the AudioSink interface and the sink that keeps audio instead of playing it.

Its own module so that the pipeline (which writes to a sink), the speaker (one sink) and the front ends (which
choose one) depend on it and not on each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from voicecli.audio.pcm import Samples
from voicecli.wire.protocol import SAMPLE_RATE


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

    def watch(self, wake: Callable[[], None]) -> None:
        """Call `wake` whenever playback moves on: an answer's first audible sample is scheduled, everything
        written has played, or stop() dropped it. It may be called from the audio thread, so `wake` must be
        thread-safe (the pipeline's hands over with loop.call_soon_threadsafe). A sink that never waits (one
        whose drained() is always True) may call it from write(), or not at all."""
        ...

    def finish(self, answer_id: str) -> None:
        """No more audio will come for this answer (so a gap after it is not an underrun)."""
        ...

    def underruns(self, answer_id: str) -> int:
        """How often the device ran dry while this answer was still coming: a gap the listener heard inside it.
        Always 0 for a sink that is not a device."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class PlayPosition(Protocol):
    """A sink that counts what it has played of each answer (the speaker). Optional: for any other sink the pipeline
    takes the time since an answer's first audible sample instead."""

    def played_s(self, answer_id: str) -> float | None:
        """Seconds of this answer's audio that have reached the listener (None: none of it written)."""
        ...


@runtime_checkable
class Holdable(Protocol):
    """A sink whose voice can pause and play on without dropping anything (the speaker), for speech that may be a
    barge-in (voicecli.listen.listener HoldVoice). Optional: a sink nobody hears has nothing to hold."""

    def hold(self) -> None:
        """Pause now, keeping everything written; `release` plays on, `stop` drops it."""
        ...

    def release(self) -> None: ...


class FirstWrites:
    """"First played" taken at an answer's first write, for sinks whose audio is not timed by a device (kept, or
    played under another id): stamps it and wakes the watcher (see AudioSink.watch)."""

    def __init__(self) -> None:
        self._first: dict[str, float] = {}
        self.wake: Callable[[], None] = lambda: None

    def stamp(self, answer_id: str) -> None:
        if answer_id not in self._first:
            self._first[answer_id] = time.monotonic()
            self.wake()

    def first_played(self, answer_id: str) -> float | None:
        return self._first.get(answer_id)


class CollectingSink:
    """Keeps the audio instead of playing it (for --out and --mute): first_played is when it was first written."""

    def __init__(self) -> None:
        self.chunks: list[Samples] = []
        self._first = FirstWrites()
        self._written: dict[str, int] = {}

    def write(self, samples: Samples, answer_id: str) -> None:
        self._first.stamp(answer_id)
        self.chunks.append(samples)
        self._written[answer_id] = self._written.get(answer_id, 0) + samples.size

    def played_s(self, answer_id: str) -> float | None:
        """Everything written counts as played, as its first write counts as first played (PlayPosition)."""
        written = self._written.get(answer_id)
        return None if written is None else written / SAMPLE_RATE

    def watch(self, wake: Callable[[], None]) -> None:
        self._first.wake = wake

    def first_played(self, answer_id: str) -> float | None:
        return self._first.first_played(answer_id)

    def stop(self) -> None:
        pass

    def drained(self) -> bool:
        return True

    def finish(self, answer_id: str) -> None:
        pass

    def underruns(self, answer_id: str) -> int:
        return 0

    def close(self) -> None:
        pass

    def audio(self) -> Samples:
        return np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)
