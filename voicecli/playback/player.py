"""Playback of decoded answer audio through a sounddevice OutputStream fed from an in-memory queue.

Why this shape:
- The TTS sends audio faster than real time in bursts; a queue of blocks decouples the network from the audio
  callback, which must never block or allocate much. The callback copies from the queue under a short lock.
- Barge-in: ``stop()`` empties the queue at once, so the very next callback plays silence. What PortAudio and the
  sound server already hold (the stream latency, DEFAULT_LATENCY_S) still plays out; that is the floor for "silence".
- Starvation is silent in PortAudio (no status flag when the app simply has no data), so underruns are counted
  here: a callback that had to zero-fill while an answer was still being written.
- Running dry mid-answer (synthesis slower than real time: 2-core Xeons make Kokoro's audio at ~0.8x real time, and
  the bench counted 89 dry 10 ms callbacks in one 2 s answer) is heard as stutter, a gap every few tens of ms,
  words broken up. After such an underrun the player waits until `rebuffer_s` of that answer is queued (or all of
  it was written) before it plays on, doubling the wait each time the same answer runs dry again, up to
  REBUFFER_MAX_S: one pause instead of a stutter (`Rebuffer`). The first sample of an answer never waits: time to
  first audio is the point of the design.
- Latency marks: for each answer we record the monotonic time its first sample (and first audible sample) reaches
  the DAC. PortAudio timestamps use the stream's own clock (on Linux/ALSA it follows the wall clock, not
  time.monotonic), so inside the callback we take ``outputBufferDacTime - currentTime`` (how far ahead of "now" this
  buffer will be heard, both in the stream clock) and add it to ``time.monotonic()`` read at callback entry. Where a
  host API reports no DAC time (0), the stream's reported output latency is used instead.
- A device that goes away mid-playback (USB unplugged, sound server killed) makes PortAudio end the stream by
  itself: no more callbacks, so nothing would ever drain. ``write`` and ``wait_done`` notice a stream that is
  neither active nor stopped by us and raise ``OutputStreamError`` saying what happened, instead of hanging.
- Waking the event loop: whoever waits for playback (the pipeline) registers ``watch(wake)``; the audio thread
  calls it when an answer's first audible sample is scheduled, when everything written has played out, and when
  the stream stops (``stop()``, or the device going away), so nobody polls. ``wake`` runs on the audio thread and
  must only hand over (loop.call_soon_threadsafe); if it raises, the error is dropped, never the stream.
- Sample rate: the source is 24 kHz mono; PulseAudio accepts that directly. Devices that refuse it get the shared
  streaming resampler (voicecli.audio.resample: libswresample, its state kept across the writes of one answer and
  its tail flushed at the answer's end) and a channel up/down-mix.
- Holding the voice: ``hold()`` pauses an answer without dropping it (the user may be starting to speak over it;
  voicecli.listen.listener HoldVoice), ``release()`` plays on, ``stop()`` drops it (the barge-in was real). The
  device is flushed at the hold, as at a stop, so the voice yields at once rather than after the stream latency; what
  the device held was not heard, so it goes back to the front of the queue (the callback keeps a short log of which
  block each played piece came from and its DAC time): on release the answer resumes at the first sample not heard.
- Echo cancellation: ``tap(reference)`` hands every block written to the device, silence included, with its DAC
  time to a ``voicecli.audio.far_end.FarEndReference`` (a copy appended to a deque; resampled later, off this
  thread). That is the far end the canceller removes: exactly what was played, stamped when it was audible; a
  ``stop`` that flushes the device tells it (``FarEndReference.cut``) that what the device held was not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.far_end import FarEndReference
from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs
from voicecli.audio.resample import StreamResampler
from voicecli.audio_devices import AudioDeviceError, DeviceInfo, load_sounddevice, resolve_device, silence_alsa_errors
from voicecli.wire.protocol import SAMPLE_RATE

__all__ = ["DEFAULT_LATENCY_S", "AnswerTiming", "OutputStreamError", "PlaybackStats", "Player"]

DEFAULT_LATENCY_S = 0.1
"""PortAudio output latency. 0.02 s works on an idle machine, but measured on a loaded 2-core box (load ~11) every
late callback (xrun) through the ALSA pulse plugin lost or shifted audio (correlation 0.6 at 0.05 s); 0.1 s gave
zero late callbacks and correlation 0.99998. It adds ~80 ms to first audio and to barge-in silence vs 0.02 s."""

REBUFFER_MAX_S = 2.0
"""The longest wait for audio after an answer ran dry (each further dry run of one answer doubles the wait)."""

STREAM_CHECK_S = 0.1
"""How often a waiting ``wait_done`` looks whether the stream is still alive."""


class OutputStreamError(AudioDeviceError):
    """The output stream ended under us (device unplugged, sound server gone); the message says what to do."""


AUDIBLE_THRESHOLD = 10 ** (-60 / 20)  # -60 dBFS: below this, a sample is treated as silence for "first audible"


@dataclass(slots=True)
class AnswerTiming:
    """Latency marks for one answer (all time.monotonic() seconds)."""

    first_write: float | None = None
    first_sample_at_dac: float | None = None
    first_audible_at_dac: float | None = None
    last_sample_at_dac: float | None = None
    frames_played: int = 0
    ended: bool = False  # end_answer() was called: no more audio will be written for it
    cancelled: bool = False  # dropped by stop()
    underruns: int = 0  # callbacks that ran dry while this answer was still being written (PlaybackStats.underruns)


@dataclass(slots=True)
class PlaybackStats:
    callbacks: int = 0
    underruns: int = 0  # callbacks that zero-filled while an answer was still being written (not counting waits)
    rebuffers: int = 0  # times playback waited for an answer's audio to build up after it ran dry
    late_callbacks: int = 0  # PortAudio output_underflow flags (the callback itself ran late)
    frames_played: int = 0
    frames_dropped_by_stop: int = 0
    stop_requested_at: float | None = None
    silence_at_dac_after_stop: float | None = None  # DAC time of the first zero-filled buffer after stop()
    lead_times: list[float] = field(default_factory=list)  # a sample of DAC lead times seen by the callback


@dataclass(slots=True)
class Rebuffer:
    """When an answer that ran dry may play on (see the module docstring): after `dry()`, `holding()` is true until
    `first_s` of audio is queued (doubled at each further dry run of the same answer, at most `max_s`) or the
    answer's audio has all been written. `first_s` 0 never holds (playback resumes with whatever arrives)."""

    rate: int
    first_s: float
    max_s: float = REBUFFER_MAX_S
    _answer: str | None = None
    _next_s: float = 0.0
    _want: int = 0
    """Frames to wait for; 0: not waiting."""

    def dry(self, answer_id: str) -> bool:
        """The answer ran dry while more of it is coming: start a wait. False (no wait) when rebuffering is off."""
        if self.first_s <= 0:
            return False
        if answer_id != self._answer:
            self._answer, self._next_s = answer_id, self.first_s
        self._want = max(1, round(self._next_s * self.rate))
        self._next_s = min(self.max_s, self._next_s * 2)
        return True

    def holding(self, answer_id: str, queued: int, ended: bool) -> bool:
        """Whether to keep waiting with `queued` frames of `answer_id` at hand (`ended`: no more will come)."""
        if not self._want:
            return False
        if answer_id != self._answer or ended or queued >= self._want:
            self._want = 0
            return False
        return True

    def cancel(self) -> None:
        self._want = 0


@dataclass(slots=True)
class _Block:
    answer_id: str
    data: NDArray[np.float32]  # (frames, stream_channels) at the stream rate
    pos: int = 0


@dataclass(frozen=True, slots=True)
class _Piece:
    """Frames `start`..`start + frames` of `block`, handed to the device to be heard at `dac` (see `hold`)."""

    dac: float
    block: _Block
    start: int
    frames: int


PIECES_KEPT_S = 1.0
"""How far back the callback's log of played pieces reaches: longer than any stream latency, so every piece the
device may still hold is in it when `hold` flushes the device."""
LEVELS_KEPT = 256
"""Callbacks whose output level the player remembers (`level_db`): 2.5-5 s of 10-20 ms blocks, more than the span
any caller asks about plus the stream latency ahead of it."""


@dataclass(frozen=True, slots=True)
class _Level:
    """The level (dBFS) of one callback's output, heard from `dac` to `until` on the monotonic clock."""

    dac: float
    until: float
    dbfs: float


class Player:
    """Plays answers (float32 at ``source_rate``) on an output device; see the module docstring for the why."""

    def __init__(
        self,
        device: str | int | None = None,
        *,
        source_rate: int = SAMPLE_RATE,
        source_channels: int = 1,
        latency: float | str = DEFAULT_LATENCY_S,
        block_ms: float = 10.0,
        stream_rate: int | None = None,
        silence_alsa: bool = True,
        rebuffer_s: float = 0.0,
    ) -> None:
        self._sd = load_sounddevice()
        if silence_alsa:
            silence_alsa_errors()
        self.device: DeviceInfo = resolve_device(device, "output")
        self.source_rate = source_rate
        self.source_channels = source_channels
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._queue: deque[_Block] = deque()
        self._queued_frames = 0
        self._timings: dict[str, AnswerTiming] = {}
        self._current: str | None = None  # answer of the most recently played sample
        self._stop_pending = False
        self._last_dac_end = 0.0
        self._wake: Callable[[], None] | None = None
        self._reference: FarEndReference | None = None
        self._playing_out = False  # written audio not yet played out: the callback wakes the watcher when it is
        self._held = False  # hold(): the callback plays silence and leaves the queue as it is
        self._pieces: deque[_Piece] = deque()  # what the callback played lately, oldest first (see hold)
        self._levels: deque[_Level] = deque(maxlen=LEVELS_KEPT)  # each callback's output level (see level_db)
        self.stats = PlaybackStats()
        self._stream: Any = self._open_stream(latency, block_ms, stream_rate)
        self._resampler: StreamResampler | None = None
        if self.stream_rate != source_rate:
            self._resampler = StreamResampler(source_rate, self.stream_rate, source_channels)
        self._resampling_for: str | None = None
        self._rebuffer = Rebuffer(self.stream_rate, rebuffer_s)
        self._stream.start()

    # -- opening -------------------------------------------------------------------------------------------------

    def _open_stream(self, latency: float | str, block_ms: float, stream_rate: int | None) -> Any:
        sd = self._sd
        rates = [stream_rate] if stream_rate else [self.source_rate, round(self.device.default_samplerate)]
        other = 2 if self.source_channels == 1 else 1
        channel_options = [self.source_channels]
        if other <= self.device.max_output_channels:
            channel_options.append(other)
        errors: list[str] = []
        for rate in dict.fromkeys(rates):
            for channels in channel_options:
                if channels > self.device.max_output_channels:
                    continue
                blocksize = max(1, round(rate * block_ms / 1000))
                try:
                    sd.check_output_settings(
                        device=self.device.index, channels=channels, dtype="float32", samplerate=rate
                    )
                    stream = sd.OutputStream(
                        samplerate=rate, channels=channels, dtype="float32", device=self.device.index,
                        blocksize=blocksize, latency=latency, callback=self._callback,
                        finished_callback=self._notify,
                    )  # fmt: skip
                except sd.PortAudioError as exc:
                    errors.append(f"{rate} Hz x{channels}: {exc}")
                    continue
                self.stream_rate = rate
                self.stream_channels = channels
                self.blocksize = blocksize
                self.latency = float(stream.latency)
                return stream
        raise AudioDeviceError(f"cannot open output device {self.device.name!r}: " + "; ".join(errors))

    # -- feeding -------------------------------------------------------------------------------------------------

    def _to_stream_format(self, samples: NDArray[np.floating[Any]], answer_id: str) -> NDArray[np.float32]:
        x = np.asarray(samples, dtype=np.float32)
        if x.ndim == 1:
            x = x.reshape(-1, self.source_channels)
        if self._resampler is not None:  # before the channel mix: a mono answer is resampled once, not per channel
            if self._resampling_for != answer_id:
                self._resampler.reset()
                self._resampling_for = answer_id
            x = self._resampler.process(x)
        return self._to_stream_channels(x)

    def _to_stream_channels(self, x: NDArray[np.float32]) -> NDArray[np.float32]:
        if x.shape[1] != self.stream_channels:
            x = np.repeat(x[:, :1], self.stream_channels, axis=1) if x.shape[1] == 1 else x.mean(axis=1, keepdims=True)
        return np.ascontiguousarray(x, dtype=np.float32)

    def write(self, samples: NDArray[np.floating[Any]], answer_id: str) -> None:
        """Queue samples (1-D interleaved or (frames, channels), float32 at source_rate) for ``answer_id``.

        Audio for an answer cancelled by ``stop()`` is dropped (late TTS chunks of an interrupted answer).
        Raises OutputStreamError when the device has gone away.
        """
        self.check_stream()
        now = time.monotonic()
        with self._lock:
            timing = self._timings.setdefault(answer_id, AnswerTiming())
            if timing.cancelled:
                return
            if timing.first_write is None:
                timing.first_write = now
        block = self._to_stream_format(samples, answer_id)
        if block.shape[0] == 0:
            return
        with self._lock:
            if timing.cancelled:
                return
            self._queue.append(_Block(answer_id, block))
            self._queued_frames += block.shape[0]
            self._playing_out = True

    def end_answer(self, answer_id: str) -> None:
        """All of this answer's audio has been written: running dry after it is not an underrun."""
        if self._resampler is not None and self._resampling_for == answer_id:
            self._resampling_for = None
            tail = self._to_stream_channels(self._resampler.flush(ndim=2))  # what the filter still held
            with self._lock:
                timing = self._timings.get(answer_id)
                if tail.shape[0] and timing is not None and not timing.cancelled:
                    self._queue.append(_Block(answer_id, tail))
                    self._queued_frames += tail.shape[0]
        with self._lock:
            self._timings.setdefault(answer_id, AnswerTiming()).ended = True

    def stop(self, flush_device: bool = True) -> float:
        """Barge-in: drop everything queued and cancel the answers written so far. Returns the monotonic time.

        The next audio callback (within one block) plays silence. With ``flush_device`` the stream is also
        aborted and restarted, which discards what PortAudio and the sound server already hold (up to the stream
        latency) instead of letting it play out.
        """
        now = time.monotonic()
        with self._lock:
            self.stats.frames_dropped_by_stop += self._queued_frames
            interrupted = {blk.answer_id for blk in self._queue}
            self._queue.clear()
            self._queued_frames = 0
            for answer_id, timing in self._timings.items():
                if answer_id in interrupted or not timing.ended:
                    timing.cancelled = True
            self._current = None
            self._held = False
            self._pieces.clear()
            self._stop_pending = True
            self.stats.stop_requested_at = now
            self.stats.silence_at_dac_after_stop = None
            self._playing_out = False
            self._rebuffer.cancel()
            self._drained.notify_all()
        if flush_device and self._stream is not None:
            self._flush_device()  # nothing is put back: the log of played pieces was cleared above
        self._notify()
        return now

    def hold(self) -> None:
        """Pause whatever is playing, dropping nothing: silence from the next callback, the device flushed, and what
        it held (never heard) back at the front of the queue. `release` plays on; `stop` drops it all."""
        with self._lock:
            if self._held:
                return
            self._held = True
        if self._stream is not None:
            self._flush_device()

    def _flush_device(self) -> None:
        """Abort and restart the stream, discarding what PortAudio and the sound server held: the pieces of it still
        in the log of played pieces go back to the front of the queue, unheard; nothing leaves the DAC after the
        flush, and the far-end reference is cut there (that audio was never played).

        The flush instant is when ``abort()`` returns, not when it was called: the device plays on while the sound
        server drops its buffer (~0.5-0.9 ms on the private PulseAudio, longer on a loaded core). Taking the call's
        start counted that audio as unheard and played it again on release (measured: 0.5-1.6 ms repeated; from the
        return, -0.15..+0.13 ms)."""
        assert self._stream is not None
        self._stream.abort()
        aborted_at = time.monotonic()
        with self._lock:
            self._requeue_unheard(aborted_at)
            self._last_dac_end = min(self._last_dac_end, aborted_at)
            while self._levels and self._levels[-1].dac >= aborted_at:
                self._levels.pop()  # handed to the device, never heard
        if self._reference is not None:
            self._reference.cut(aborted_at)
        self._stream.start()

    def release(self) -> None:
        """Play on after `hold` from the first sample not heard (nothing to do when not held)."""
        with self._lock:
            self._held = False
        self._notify()

    @property
    def held(self) -> bool:
        return self._held

    @property
    def sounding_until(self) -> float:
        """Monotonic time the last sample handed to the device leaves the DAC (the flush, after a hold or a stop
        that flushed it); 0.0 before anything was played."""
        with self._lock:
            return self._last_dac_end

    def level_db(self, since: float, until: float) -> float:
        """The loudest level (dBFS, each callback's block) of what was heard at the DAC between the monotonic
        times `since` and `until`; SILENCE_DBFS when nothing was. Why the DAC's time and not what was written last:
        the answer is written seconds ahead of playback, in bursts of pieces of any level, and what the microphone
        can hear now is what left the DAC just before (the echo gate, voicecli.playback.speaker.Speaker.level_db).
        A block a flush discarded was never heard and does not count."""
        with self._lock:
            heard = [level.dbfs for level in self._levels if level.dac < until and level.until > since]
        return max(heard, default=SILENCE_DBFS)

    def _requeue_unheard(self, flushed_at: float) -> None:
        """Put the pieces (or their ends) due at the DAC at or after `flushed_at` back in front of the queue, in
        order, and count them as not played. Called under the lock, with no callback running (the stream aborted)."""
        rate = self.stream_rate
        while self._pieces:
            piece = self._pieces.pop()  # newest first: each goes in front of the ones put back before it
            heard = max(0, math.ceil((flushed_at - piece.dac) * rate))
            if heard >= piece.frames:
                break  # this one and all older ones were heard
            unheard = piece.frames - heard
            start = piece.start + heard
            self._queue.appendleft(_Block(piece.block.answer_id, piece.block.data[start : piece.start + piece.frames]))
            self._queued_frames += unheard
            self.stats.frames_played -= unheard
            timing = self._timings[piece.block.answer_id]
            timing.frames_played -= unheard
            if timing.last_sample_at_dac is not None:
                timing.last_sample_at_dac = min(timing.last_sample_at_dac, flushed_at)
        self._pieces.clear()
        if self._queue:
            self._playing_out = True

    def watch(self, wake: Callable[[], None] | None) -> None:
        """Call `wake` (on the audio thread) when playback moves on; see the module docstring."""
        self._wake = wake

    def tap(self, reference: FarEndReference | None) -> None:
        """Hand every block written to the device, with its DAC time, to `reference` (None: stop); see above."""
        self._reference = reference

    def _notify(self) -> None:
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(Exception):  # a closed event loop must not abort the audio stream
                wake()

    # -- the audio thread ----------------------------------------------------------------------------------------

    def _callback(self, outdata: NDArray[np.float32], frames: int, time_info: Any, status: Any) -> None:
        now = time.monotonic()
        lead = float(time_info.outputBufferDacTime) - float(time_info.currentTime)
        if not 0.0 <= lead < 2.0 or time_info.outputBufferDacTime == 0:
            lead = self.latency
        dac0 = now + lead
        rate = self.stream_rate
        wake = False
        with self._lock:
            stats = self.stats
            stats.callbacks += 1
            if status.output_underflow:
                stats.late_callbacks += 1
            if len(stats.lead_times) < 200:
                stats.lead_times.append(lead)
            if self._stop_pending:
                self._stop_pending = False
                stats.silence_at_dac_after_stop = dac0
            filled = 0
            queue = self._queue
            head = queue[0].answer_id if queue else self._current  # the answer that plays next, or ran dry
            waiting = self._held or (
                head is not None and self._rebuffer.holding(head, self._queued_frames, self._timings[head].ended))
            pieces = self._pieces
            while pieces and pieces[0].dac < now - PIECES_KEPT_S:
                pieces.popleft()
            while filled < frames and queue and not waiting:
                blk = queue[0]
                n = min(frames - filled, blk.data.shape[0] - blk.pos)
                chunk = blk.data[blk.pos : blk.pos + n]
                outdata[filled : filled + n] = chunk
                timing = self._timings[blk.answer_id]
                at = dac0 + filled / rate
                if timing.first_sample_at_dac is None:
                    timing.first_sample_at_dac = at
                if timing.first_audible_at_dac is None:
                    loud = np.flatnonzero(np.abs(chunk).max(axis=1) > AUDIBLE_THRESHOLD)
                    if loud.size:
                        timing.first_audible_at_dac = at + int(loud[0]) / rate
                        wake = True
                timing.frames_played += n
                timing.last_sample_at_dac = dac0 + (filled + n) / rate
                pieces.append(_Piece(at, blk, blk.pos, n))
                self._current = blk.answer_id
                blk.pos += n
                filled += n
                if blk.pos >= blk.data.shape[0]:
                    queue.popleft()
            self._queued_frames -= filled
            stats.frames_played += filled
            if filled:
                self._last_dac_end = dac0 + filled / rate
            if filled < frames:
                outdata[filled:] = 0.0
                current = self._timings.get(self._current) if self._current is not None else None
                if current is not None and not current.ended and not current.cancelled and not waiting:
                    stats.underruns += 1
                    current.underruns += 1
                    assert self._current is not None
                    if self._rebuffer.dry(self._current):
                        stats.rebuffers += 1
                if not queue:
                    self._drained.notify_all()
            if not queue and self._playing_out and now >= self._last_dac_end:
                self._playing_out = False  # the last sample written has left the DAC
                wake = True
            self._levels.append(_Level(dac0, dac0 + frames / rate, rms_dbfs(outdata)))
        reference = self._reference
        if reference is not None:
            reference.push(outdata, rate, dac0)
        if wake:
            self._notify()

    # -- waiting and closing -------------------------------------------------------------------------------------

    def timing(self, answer_id: str) -> AnswerTiming | None:
        with self._lock:
            t = self._timings.get(answer_id)
            return None if t is None else dataclasses.replace(t)

    def first_audible(self, answer_id: str) -> float | None:
        """Monotonic time the answer's first audible sample reached the DAC (None until it has)."""
        t = self.timing(answer_id)
        return None if t is None else t.first_audible_at_dac

    @property
    def queued_seconds(self) -> float:
        with self._lock:
            return self._queued_frames / self.stream_rate

    def check_stream(self) -> None:
        """Raise OutputStreamError if PortAudio ended the stream by itself (it does when the device goes away)."""
        stream = self._stream
        if stream is None or stream.active or stream.stopped:
            return
        with self._lock:
            lost = self._queued_frames / self.stream_rate
        raise OutputStreamError(
            f"the audio output stopped: device {self.device.name!r} went away (unplugged, or the sound server "
            f"stopped) with {lost:.1f} s of audio unplayed; check the output device with `voicecli doctor`, "
            "then restart the chat"
        )

    def wait_done(self, timeout: float | None = None) -> bool:
        """Block until everything written so far has been played out of the DAC. False on timeout.

        Raises OutputStreamError when the device goes away meanwhile (the queue would never drain).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.check_stream()
            with self._lock:
                if not self._queue:
                    end = self._last_dac_end
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._drained.wait(STREAM_CHECK_S if remaining is None else min(remaining, STREAM_CHECK_S))
        tail = end - time.monotonic()
        if tail > 0:
            if deadline is not None and time.monotonic() + tail > deadline:
                time.sleep(max(0.0, deadline - time.monotonic()))
                return False
            time.sleep(tail)
        return True

    def close(self) -> None:
        if self._stream is not None:
            self._stream.stop()
            self._stream.close()
            self._stream = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
