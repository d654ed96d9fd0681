"""The room between the virtual speaker and the virtual microphone: the echo path of `voicecli bench duplex`.

Why: with a real loudspeaker the microphone hears the assistant's own answer again, a little later, louder or
softer than the user and smeared by the room; that echo is what makes a voice app interrupt itself. The private
PulseAudio (voicecli.bench.virtual_audio) keeps speaker and microphone apart, so the duplex bench puts a room back
between them: `EchoRouter` records what is played on `vspeaker.monitor`, convolves it with a room impulse
response, scales it and delays it, and writes it into `vmic_in`, where PulseAudio mixes it with whatever the user
"says" there (paplay). PulseAudio's module-loopback would give the delay and the gain but no room, hence this small
real-time router (parec -> numpy -> pacat, 16 kHz mono float32).

The room (`room_impulse_response`): a synthetic, seeded impulse response: the direct path at 0 ms, EARLY_REFLECTIONS
discrete reflections 2-25 ms later (amplitudes 0.2-0.6 of the direct path, random signs, weaker the later they
come), and a diffuse tail of Gaussian noise decaying exponentially to -60 dB at RT60_S (a furnished living room),
about 6 dB below the direct path in energy; the whole response is scaled to unit energy, so the echo's level is set
by the gain alone.

The router's own latency (parec's and pacat's buffers, ~30-60 ms here) is part of every echo; the router measures
it once (`calibrate`: a noise burst played on the speaker, found again in the microphone by cross-correlation of
two recordings on one clock) and delays by the target minus that, so the echo arrives the requested delay after
the speaker played it (a target below the router's own latency cannot be met: `effective_delay_ms` says what is).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.levels import rms_dbfs
from voicecli.bench.virtual_audio import MIC_SINK, MIC_SOURCE, SPEAKER_MONITOR, PrivatePulse, write_wav_int16

ECHO_RATE = 16_000
"""The router's rate: the app listens at 16 kHz, so the echo above 8 kHz would never reach it anyway."""
RT60_S = 0.3
RIR_LENGTH_S = 0.25
EARLY_REFLECTIONS = 6
TAIL_DB = -6.0
"""Energy of the diffuse tail relative to the direct path and early reflections."""
BLOCK = 512
"""Largest piece convolved at once (32 ms); larger reads are split."""
READ_LATENCY_MS = 10
WRITE_LATENCY_MS = 30
"""pacat's target buffer: below ~20 ms the router's writes underrun on a busy 2-core machine."""
MEASURE_PIECE_S = 0.25
"""The pieces `measure_path` finds the sound in, one by one (see there)."""
CALIBRATION_S = 1.5
CALIBRATION_DBFS = -20.0
MAX_LAG_S = 0.5
SILENT_PIECE_DBFS = -50.0
"""A piece of reference quieter than this has nothing to find (find_echo_piecewise)."""


@functools.cache
def realtime_prefix() -> tuple[str, ...]:
    """`chrt -f 10` where this process may use real-time scheduling (root in a container): parec and pacat then
    run before the app's inference threads and do not stall; nothing where it may not."""
    allowed = shutil.which("chrt") is not None and subprocess.run(
        ["chrt", "-f", "10", "true"], capture_output=True, check=False).returncode == 0
    return ("chrt", "-f", "10") if allowed else ()


def _realtime_thread() -> None:
    """Run the calling thread (the router's) under SCHED_FIFO where allowed, as parec and pacat are: a router
    thread that waits behind the app's inference for a few tens of ms lets pacat run dry, and every such gap stays
    in the echo's delay until the next resync (measured in CI-like runs: 114-200 ms for 80 asked)."""
    if realtime_prefix():
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # 0: the calling thread on Linux


def room_impulse_response(seed: int = 0, rate: int = ECHO_RATE, rt60_s: float = RT60_S,
                          length_s: float = RIR_LENGTH_S) -> NDArray[np.float32]:
    """A seeded synthetic room (see the module docstring), unit energy, direct path at sample 0."""
    rng = np.random.default_rng(seed)
    size = round(length_s * rate)
    response = np.zeros(size, dtype=np.float64)
    response[0] = 1.0
    delays = np.sort(rng.uniform(0.002, 0.025, EARLY_REFLECTIONS))
    for delay in delays:
        amplitude = rng.uniform(0.2, 0.6) * (1.0 - 10 * delay) * rng.choice((-1.0, 1.0))
        response[round(delay * rate)] += amplitude
    early_energy = float(np.sum(np.square(response)))
    start = round(0.005 * rate)
    t = np.arange(size - start) / rate
    tail = rng.standard_normal(size - start) * np.exp(-3 * math.log(10) * t / rt60_s)  # -60 dB at rt60
    tail *= math.sqrt(early_energy * 10 ** (TAIL_DB / 10) / float(np.sum(np.square(tail))))
    response[start:] += tail
    response /= math.sqrt(float(np.sum(np.square(response))))
    return response.astype(np.float32)


class StreamingConvolver:
    """Convolves an endless signal piece by piece (FFT overlap-add): each call returns as many samples as it gets,
    the same as convolving the whole signal at once and cutting it in the same places."""

    def __init__(self, kernel: NDArray[np.float32], block: int = BLOCK) -> None:
        self.block = block
        self.taps = len(kernel)
        self.size = 1 << (block + self.taps - 1).bit_length()
        self._kernel = np.fft.rfft(kernel.astype(np.float64), self.size)
        self._tail = np.zeros(self.taps - 1, dtype=np.float64)

    def process(self, samples: NDArray[np.float32]) -> NDArray[np.float32]:
        out = np.empty(len(samples), dtype=np.float32)
        for start in range(0, len(samples), self.block):
            piece = samples[start:start + self.block].astype(np.float64)
            full = np.fft.irfft(np.fft.rfft(piece, self.size) * self._kernel, self.size)[:len(piece) + self.taps - 1]
            full[:len(self._tail)] += self._tail
            out[start:start + len(piece)] = full[:len(piece)]
            self._tail = full[len(piece):].copy()
        return out


class DelayLine:
    """A FIFO of samples: what goes in comes out `delay` samples later. The delay can change between answers
    (while the speaker is quiet): longer inserts silence, shorter drops the oldest samples."""

    def __init__(self, delay: int) -> None:
        self._buffer = np.zeros(max(0, delay), dtype=np.float32)

    @property
    def delay(self) -> int:
        return len(self._buffer)

    def set_delay(self, delay: int) -> None:
        delay = max(0, delay)
        if delay > len(self._buffer):
            self._buffer = np.concatenate([np.zeros(delay - len(self._buffer), dtype=np.float32), self._buffer])
        else:
            self._buffer = self._buffer[len(self._buffer) - delay:]

    def process(self, samples: NDArray[np.float32]) -> NDArray[np.float32]:
        joined = np.concatenate([self._buffer, samples.astype(np.float32)])
        self._buffer = joined[len(samples):]
        return joined[:len(samples)]


@dataclass(frozen=True)
class EchoEstimate:
    """Where a reference signal reappears in a capture: its lag, its level relative to the reference, and how
    sure that is (the normalised cross-correlation at the lag: ~0.9+ for a clean delayed copy, ~0 for none)."""

    lag_s: float
    gain_db: float
    correlation: float


def find_echo(reference: NDArray[np.float32], captured: NDArray[np.float32], rate: int,
              max_lag_s: float = MAX_LAG_S) -> EchoEstimate | None:
    """The lag (0..max_lag_s) at which `reference` best matches `captured` (both starting at the same instant),
    by FFT cross-correlation; None when either is silent. The gain is the capture's level over the reference's
    over the overlap (so it includes the room's and anything else in the capture)."""
    max_lag = min(round(max_lag_s * rate), len(captured) - 1)
    length = min(len(reference), len(captured) - max_lag)
    if length <= 0 or max_lag < 0:
        return None
    ref = reference[:length].astype(np.float64)
    cap = captured[:length + max_lag].astype(np.float64)
    if not np.any(ref) or not np.any(cap):
        return None
    size = 1 << (len(ref) + len(cap)).bit_length()
    corr = np.fft.irfft(np.conj(np.fft.rfft(ref, size)) * np.fft.rfft(cap, size), size)[:max_lag + 1]
    energy = np.concatenate([[0.0], np.cumsum(np.square(cap))])
    window = energy[length:length + max_lag + 1] - energy[:max_lag + 1]
    norm = np.sqrt(np.maximum(window, 1e-20) * float(np.sum(np.square(ref))))
    normalised = corr / norm
    lag = int(np.argmax(normalised))
    gain = 10 * math.log10(max(float(window[lag]), 1e-20) / float(np.sum(np.square(ref))))
    return EchoEstimate(lag / rate, gain, float(normalised[lag]))


def find_pieces(reference: NDArray[np.float32], captured: NDArray[np.float32], rate: int, piece_s: float = 1.0,
                max_lag_s: float = MAX_LAG_S, silent_dbfs: float = SILENT_PIECE_DBFS) -> list[tuple[int, EchoEstimate]]:
    """find_echo on each `piece_s` of `reference` louder than `silent_dbfs` (a last piece of at least half that
    length included), against the capture from that piece's start on: (the piece's first sample, where and how
    it came back), for the pieces found."""
    size = round(piece_s * rate)
    found = []
    for start in range(0, max(1, len(reference) - size // 2), size):
        piece = reference[start:start + size]
        if rms_dbfs(piece) <= silent_dbfs:
            continue
        estimate = find_echo(piece, captured[start:start + len(piece) + round(max_lag_s * rate)], rate, max_lag_s)
        if estimate is not None:
            found.append((start, estimate))
    return found


def find_echo_piecewise(reference: NDArray[np.float32], captured: NDArray[np.float32], rate: int,
                        piece_s: float = 1.0, max_lag_s: float = MAX_LAG_S) -> EchoEstimate | None:
    """The medians of find_pieces' lags, gains and correlations (None when no piece has sound or an echo).

    Why pieces: over a whole answer of several seconds the echo path's delay can creep (a stall in the router's
    parec or pacat on a busy machine adds its buffer's worth, for good), and one correlation over the whole answer
    then reads low although every second of it came back; the median of short pieces says how each came back."""
    found = [estimate for _, estimate in find_pieces(reference, captured, rate, piece_s, max_lag_s)]
    if not found:
        return None
    return EchoEstimate(float(np.median([e.lag_s for e in found])), float(np.median([e.gain_db for e in found])),
                        float(np.median([e.correlation for e in found])))


class EchoRouter:
    """The echo path, running: speaker monitor -> room -> gain -> delay -> microphone. A context manager.

    `gain_db` and `target_delay_ms` may change while it runs (between answers); `calibrate()` measures the router's
    own latency so that the delay it adds makes the echo arrive `target_delay_ms` after the speaker played it.
    """

    def __init__(self, pulse: PrivatePulse, target_delay_ms: float, gain_db: float, seed: int = 0) -> None:
        self.pulse = pulse
        self.room = room_impulse_response(seed)
        self.gain_db = gain_db
        self.target_delay_ms = target_delay_ms
        self.own_latency_ms: float | None = None
        """The router's own latency (parec + processing + pacat), once calibrated."""
        self._convolver = StreamingConvolver(self.room)
        self._delay = DelayLine(round(target_delay_ms * ECHO_RATE / 1000))
        self._room_on = True
        """False while calibrating: the burst goes through unchanged, so only the router's latency is measured."""
        self._lock = threading.Lock()
        self._reader: subprocess.Popen[bytes] | None = None
        self._writer: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self.processed_frames = 0

    def __enter__(self) -> Self:
        self._start()
        return self

    def _start(self) -> None:
        env = self.pulse.child_env()
        self._reader = subprocess.Popen(
            [*realtime_prefix(), "parec", "-d", SPEAKER_MONITOR, "--format=float32le", f"--rate={ECHO_RATE}",
             "--channels=1", "--raw", f"--latency-msec={READ_LATENCY_MS}"], env=env, stdout=subprocess.PIPE)
        self._writer = subprocess.Popen(
            [*realtime_prefix(), "pacat", "--playback", "-d", MIC_SINK, "--format=float32le", f"--rate={ECHO_RATE}",
             "--channels=1", "--raw", f"--latency-msec={WRITE_LATENCY_MS}", "--stream-name=voicecli-echo-path"],
            env=env, stdin=subprocess.PIPE)
        self._thread = threading.Thread(target=self._route, name="echo-path", daemon=True)
        self._thread.start()

    def resync(self) -> None:
        """Restart the path while the speaker is quiet: a stall of parec or pacat on a busy machine leaves their
        buffers fuller, and the echo later, for good (measured: stalls of 50 / 150 / 300 ms moved a 90 ms echo to
        115 / 220 / 375 ms); a fresh pair starts again at the calibrated latency. Why not drop a stall's backlog
        instead: the router cannot see pacat's buffer, and both rules tried (by how late each read came; by a model
        of the buffer) either chopped on-time audio read in bursts on a loaded machine or let pacat run dry unseen
        (echo correlation 0.1-0.36, delays 110-126 ms for 90 beside a CI run). Whoever measures resyncs first."""
        self._stop()
        with self._lock:
            self._convolver = StreamingConvolver(self.room)
            self._delay = DelayLine(0)
            self._apply_delay()
        self._start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def _stop(self) -> None:
        for process in (self._reader, self._writer):
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def effective_delay_ms(self) -> float | None:
        """The echo's delay after the speaker as it will be: the target, or the router's own latency when that is
        longer (None before `calibrate`)."""
        if self.own_latency_ms is None:
            return None
        return max(self.target_delay_ms, self.own_latency_ms)

    def set_gain_db(self, gain_db: float) -> None:
        with self._lock:
            self.gain_db = gain_db

    def set_target_delay_ms(self, delay_ms: float) -> None:
        """Change the echo's delay; call it while the speaker is quiet (a change drops or inserts samples)."""
        with self._lock:
            self.target_delay_ms = delay_ms
            self._apply_delay()

    def _apply_delay(self) -> None:
        own = self.own_latency_ms or 0.0
        self._delay.set_delay(round(max(0.0, self.target_delay_ms - own) * ECHO_RATE / 1000))

    def _route(self) -> None:
        _realtime_thread()
        assert self._reader is not None and self._writer is not None
        stdout, stdin = self._reader.stdout, self._writer.stdin
        assert isinstance(stdout, io.BufferedReader) and stdin is not None
        pending = b""
        while True:
            data = stdout.read1(4096)
            if not data:
                return
            pending += data
            usable = len(pending) - len(pending) % 4
            samples = np.frombuffer(pending[:usable], dtype="<f4")
            pending = pending[usable:]
            with self._lock:
                roomed = self._convolver.process(samples) if self._room_on else samples
                echo = self._delay.process(roomed * np.float32(10 ** (self.gain_db / 20)))
            self.processed_frames += len(samples)
            try:
                stdin.write(echo.astype("<f4").tobytes())
                stdin.flush()
            except (BrokenPipeError, ValueError):
                return

    def calibrate(self, work: Path, seed: int = 1) -> EchoEstimate:
        """Measure the router's own latency: play a noise burst on the speaker with no added delay and no room,
        find it in the microphone; then set the delay line to the target minus that. Returns the measurement.

        Without the room the burst comes back as a clean copy (correlation ~0.9+ at the lag): through the room only
        the direct path's share of the energy correlates at one lag, which on a loaded machine fell below what
        tells a real echo from chance (0.34 in CI)."""
        with self._lock:
            saved_target, saved_gain = self.target_delay_ms, self.gain_db
            self._delay.set_delay(0)
            self.gain_db = 0.0
            self._room_on = False
        rng = np.random.default_rng(seed)
        burst = (rng.standard_normal(round(CALIBRATION_S * ECHO_RATE)) * 10 ** (CALIBRATION_DBFS / 20))
        path = work / "echo-calibration.wav"
        write_wav_int16(path, np.concatenate([np.zeros(ECHO_RATE // 5), burst, np.zeros(ECHO_RATE // 2)]).astype(
            np.float32), ECHO_RATE)
        estimate = measure_path(self.pulse, path, CALIBRATION_S)
        with self._lock:
            self.own_latency_ms = None if estimate is None else estimate.lag_s * 1000
            self.target_delay_ms, self.gain_db = saved_target, saved_gain
            self._room_on = True
            self._apply_delay()
        if estimate is None:
            raise RuntimeError("the echo path carried nothing from the speaker to the microphone")
        return estimate


def measure_path(pulse: PrivatePulse, wav: Path, seconds: float) -> EchoEstimate | None:
    """Play `wav` on the speaker while recording the speaker's monitor and the microphone, and find the speaker's
    sound in the microphone (the lag is on the shared monotonic clock of the two recorders, ~10 ms each).

    By MEASURE_PIECE_S pieces, their medians: on a loaded machine pacat can run dry mid-sound, and the rest then comes
    back ~25 ms later (seen: pieces at 27 then 52 ms, one correlation over the whole 0.69, each piece 0.88+)."""
    monitor = pulse.record(SPEAKER_MONITOR, rate=ECHO_RATE)
    mic = pulse.record(MIC_SOURCE, rate=ECHO_RATE)
    try:
        time.sleep(0.3)
        subprocess.run(["paplay", str(wav)], env=pulse.child_env(), check=True, timeout=60)
        time.sleep(MAX_LAG_S + 0.2)
        played = monitor.samples()
        onset = np.flatnonzero(np.abs(played) > 10 ** ((CALIBRATION_DBFS - 20) / 20))
        if onset.size == 0:
            return None
        start = int(onset[0])
        at = monitor.time_of_frame(start)
        reference = played[start:start + round(seconds * ECHO_RATE)]
        mic_start = round(mic.frame_at(at))
        captured = mic.samples(mic_start, mic_start + len(reference) + round(MAX_LAG_S * ECHO_RATE))
        return find_echo_piecewise(reference, captured, ECHO_RATE, MEASURE_PIECE_S)
    finally:
        monitor.stop()
        mic.stop()
