"""Microphone capture: a PortAudio input stream delivering 16 kHz mono float32 blocks to asyncio.

Why 16 kHz mono: it is what Silero VAD and Whisper consume, so nothing downstream resamples. Most devices (and the
ALSA pulse plugin) accept 16 kHz directly; a device that refuses it is opened at its own rate and resampled here
with libswresample (PyAV, already a faster-whisper dependency), which keeps filter state across blocks.

Why the copy and call_soon_threadsafe: PortAudio reuses the callback's buffer and runs on its own thread; the copy
is handed to the event loop, which is the only place the queue is touched. Each block is stamped with the monotonic
time of its callback, the clock every latency mark uses.

A missing microphone is an expected condition (servers, containers, SSH): every way of failing to get one raises
NoMicrophoneError with a sentence the app can show as "no microphone: typing still works".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.audio.resample import StreamResampler
from voicecli.audio_devices import (
    AudioDeviceError,
    DeviceInfo,
    NoDeviceError,
    load_sounddevice,
    reinitialize_portaudio,
    resolve_device,
)

Audio = NDArray[np.float32]
log = logging.getLogger(__name__)


class NoMicrophoneError(AudioDeviceError):
    """No usable input device: PortAudio missing, no input devices, or the requested one does not exist."""


@dataclass(frozen=True)
class AudioBlock:
    """One captured block: 16 kHz mono samples and the monotonic time its callback ran."""

    samples: Audio
    at: float


def find_microphone(device: int | str | None) -> DeviceInfo:
    """The input device for an index, a (unique part of a) name, or None (the default), else NoMicrophoneError."""
    try:
        try:
            return resolve_device(device, "input")
        except NoDeviceError:
            # No input device at all: PortAudio may have enumerated before the sound server (or its env) appeared.
            # Re-scanning is safe here because with no devices no other stream can be open.
            reinitialize_portaudio()
            return resolve_device(device, "input")
    except AudioDeviceError as exc:
        raise NoMicrophoneError(str(exc)) from exc


class Microphone:
    """Live microphone input; start() inside a running event loop, then read `queue` (or iterate blocks()).

    - device: PortAudio index, (part of a) name, or None for the default input.
    - block_ms: callback period. Why 10 ms: a block is stamped when its callback runs, so the block's length (and
      the buffering PortAudio asks of the sound server for it) is latency on every barge-in and turn start. On
      PulseAudio here, 32 ms blocks (one Silero window each) were reported at 64 ms input latency and came in bursts
      (40 ms apart, or two at once); 10 ms blocks at 20 ms, steadily 10 ms apart. The voice detector gathers its
      32 ms windows across blocks, and the echo canceller works in 10 ms frames anyway.
    - device_rate: force the rate the device is opened at (None: 16 kHz if accepted, else the device's default).
    - max_queue_s: blocks older than this are dropped (and counted) if the consumer stalls, rather than piling up.
    """

    def __init__(
        self,
        device: int | str | None = None,
        *,
        block_ms: float = 10.0,
        device_rate: int | None = None,
        latency: str | float = "low",
        max_queue_s: float = 10.0,
    ) -> None:
        try:
            self._sd = load_sounddevice()
        except AudioDeviceError as exc:
            raise NoMicrophoneError(str(exc)) from exc
        self.device_info = find_microphone(device)
        self.device_index = self.device_info.index
        self.device_name = self.device_info.name
        self.device_rate = device_rate or self._pick_rate()
        self.block_ms = block_ms
        self._latency = latency
        self._max_blocks = max(1, math.ceil(max_queue_s * 1000 / block_ms))
        self._resample = StreamResampler(self.device_rate, SPEECH_RATE) if self.device_rate != SPEECH_RATE else None
        self._stream: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.queue: asyncio.Queue[AudioBlock] = asyncio.Queue()
        self._level = SILENCE_DBFS
        self.overflows = 0
        """Blocks PortAudio reported as overflowed (input lost because the callback ran late)."""
        self.dropped = 0
        """Blocks discarded because the consumer fell more than max_queue_s behind."""
        self.process: Callable[[AudioBlock], AudioBlock] | None = None
        """Applied to each block on the event loop before it is queued (the echo canceller); the level meter still
        reads the raw input."""

    def _pick_rate(self) -> int:
        try:
            self._sd.check_input_settings(device=self.device_index, channels=1, dtype="float32", samplerate=SPEECH_RATE)
            return SPEECH_RATE
        except (ValueError, self._sd.PortAudioError):
            return int(self.device_info.default_samplerate)

    @property
    def level_dbfs(self) -> float:
        """RMS level of the latest block, for the level meter (SILENCE_DBFS when stopped)."""
        return self._level

    @property
    def active(self) -> bool:
        return self._stream is not None and bool(self._stream.active)

    @property
    def latency_s(self) -> float:
        """PortAudio's reported input latency of the open stream (0.0 when closed)."""
        return float(self._stream.latency) if self._stream is not None else 0.0

    def start(self) -> None:
        """Open (first time) and start the stream; must be called from the event loop that reads the queue."""
        self._loop = asyncio.get_running_loop()
        if self._stream is None:
            try:
                self._stream = self._sd.InputStream(
                    device=self.device_index,
                    samplerate=self.device_rate,
                    channels=1,
                    dtype="float32",
                    blocksize=round(self.device_rate * self.block_ms / 1000),
                    latency=self._latency,
                    callback=self._callback,
                )
            except (ValueError, self._sd.PortAudioError) as exc:
                raise NoMicrophoneError(f"cannot open microphone {self.device_name!r}: {exc}") from exc
        if not self._stream.active:
            self._stream.start()

    def stop(self) -> None:
        """Stop delivering blocks (and say in the log if input was lost since the last stop); start() resumes on the
        same stream."""
        if self._stream is not None and self._stream.active:
            self._stream.stop()
        self._level = SILENCE_DBFS
        self._report_lost()

    def close(self) -> None:
        """Stop and release the device."""
        if self._stream is not None:
            self._stream.close(ignore_errors=True)
            self._stream = None
        self._level = SILENCE_DBFS
        self._report_lost()

    def _report_lost(self) -> None:
        """Warn of input lost since the last report: a block size too small for a busy machine shows here."""
        if self.overflows or self.dropped:
            log.warning("the microphone lost input: %d blocks overflowed (the callback ran late), %d dropped (the "
                        "app fell behind)", self.overflows, self.dropped)
            self.overflows = self.dropped = 0

    async def blocks(self) -> AsyncIterator[AudioBlock]:
        """Blocks as they arrive (runs until cancelled)."""
        while True:
            yield await self.queue.get()

    def drain(self) -> list[AudioBlock]:
        """Everything queued so far, without waiting."""
        out: list[AudioBlock] = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out

    def _callback(self, indata: Audio, frames: int, time_info: Any, status: Any) -> None:
        at = time.monotonic()
        if status.input_overflow:
            self.overflows += 1
        samples = indata[:, 0] if indata.ndim == 2 else indata
        # The copy matters: PortAudio reuses `indata` for the next callback.
        samples = samples.copy() if self._resample is None else self._resample.process(np.ascontiguousarray(samples))
        if len(samples) == 0:
            return
        self._level = rms_dbfs(samples)
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
            loop.call_soon_threadsafe(self._deliver, AudioBlock(samples, at))

    def _deliver(self, block: AudioBlock) -> None:
        """On the event loop: clean (``process``), then enqueue, shedding the oldest block if the consumer is far
        behind."""
        if self.process is not None:
            block = self.process(block)
            if len(block.samples) == 0:
                return
        while self.queue.qsize() >= self._max_blocks:
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(block)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
