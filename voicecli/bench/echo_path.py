"""The room between the virtual speaker and the virtual microphone: the echo path of `voicecli bench duplex`.

Why: with a real loudspeaker the microphone hears the assistant's own answer again, a little later, louder or
softer than the user and smeared by the room; that echo is what makes a voice app interrupt itself. The private
PulseAudio (voicecli.bench.virtual_audio) keeps speaker and microphone apart, so the duplex bench puts a room back
between them: `EchoRouter` records what is played on `vspeaker.monitor`, convolves it with a room impulse
response, scales it and delays it, and writes it into `vmic_in`, where PulseAudio mixes it with whatever the user
"says" there (paplay). PulseAudio's module-loopback would give the delay and the gain but no room, hence this small
real-time router (parec -> numpy -> pacat, 16 kHz mono float32), a process of its own (`_route`: the bench's GIL
held it up as a thread).

The room (`room_impulse_response`): a synthetic, seeded impulse response: the direct path at 0 ms, EARLY_REFLECTIONS
discrete reflections 2-25 ms later (amplitudes 0.2-0.6 of the direct path, random signs, weaker the later they
come), and a diffuse tail of Gaussian noise decaying exponentially to -60 dB at RT60_S (a furnished living room),
about 6 dB below the direct path in energy; the whole response is scaled to unit energy, so the echo's level is set
by the gain alone.

The router's own latency (parec's and pacat's buffers, ~20-30 ms here) is part of every echo; the router measures
it once (`calibrate`: noise bursts played on the speaker, found again in the microphone by cross-correlation of
two recordings on one clock, the median of the bursts) and delays by the target minus that, so the echo arrives
the requested delay after the speaker played it (a target below the router's own latency cannot be met:
`effective_delay_ms` says what is). Through the app's pauses (a held voice, the gaps between sentences) the router
keeps writing, so the echo keeps one delay, as a room's does. A loaded machine can still make the router late
mid-sound, and the rest of that sound's echo comes later; the router then stops writing at the next quiet (and
after 1.5 s of any quiet), so the next sound starts again at the calibrated latency (`RoomPath.holding`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.echo_delay import fft_size
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
CALIBRATION_S = 0.75
CALIBRATION_BURSTS = 3
"""Bursts `calibrate` plays, each after a quiet stretch (so each starts the path the way an answer does); the
median lag is the router's latency. One burst was not enough: a stall of the machine as a burst began made the
whole burst late, and CI once calibrated 188 ms for a path that carries sound in 20-30 ms."""
CALIBRATION_DBFS = -20.0
MAX_LAG_S = 0.5
SILENT_PIECE_DBFS = -50.0
"""A piece of reference quieter than this has nothing to find (find_echo_piecewise)."""
SILENT_SAMPLE = 1e-6
"""A speaker sample below this is silence (the monitor of a quiet null sink reads exact zeros)."""
QUIET_MARGIN_S = 1.5
"""How long after the path has written out its last echo (delay line and room tail) it stops writing silence, when
it has not fallen behind (`RoomPath.fell_behind`). Why this long: while pacat is fed, the echo of speaker sample k
lands at microphone sample k plus a constant, as in a room; once it runs dry, it starts again with the next sound
at its target latency after that sound arrives, and how late the monitor delivers its samples moves at every
restart of the app's output stream (2-11 ms either way over 20 restarts:
results/bench/stretch-placement-20261206/restart_dac_times.py). With 0.1 s, every hold of the app's voice (a ~0.6 s
pause) ran it dry and moved the echo by those ms, which the app's canceller then re-adapted to: the bench measuring
its own equipment. 1.5 s spans a hold's pause and the gaps between sentences."""
BEHIND_MARGIN_S = 0.1
"""The margin instead once the path has fallen behind: the backlog waiting in pacat clears at the first quiet."""
READ_GAP_S = 0.05
"""A wait this long between two reads of the monitor (parec delivers every ~10 ms) means the router was held up:
pacat (30 ms of buffer) ran short meanwhile and what follows waits in it, later than asked."""


@functools.cache
def realtime_prefix() -> tuple[str, ...]:
    """`chrt -f 10` where this process may use real-time scheduling (root in a container): parec and pacat then
    run before the app's inference threads and do not stall; nothing where it may not."""
    allowed = shutil.which("chrt") is not None and subprocess.run(
        ["chrt", "-f", "10", "true"], capture_output=True, check=False).returncode == 0
    return ("chrt", "-f", "10") if allowed else ()


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
        self.size = fft_size(block + self.taps - 1)
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
    size = fft_size(len(ref) + len(cap))
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


def median_estimate(found: list[EchoEstimate]) -> EchoEstimate | None:
    """The medians of several estimates' lags, gains and correlations (None for none)."""
    if not found:
        return None
    return EchoEstimate(float(np.median([e.lag_s for e in found])), float(np.median([e.gain_db for e in found])),
                        float(np.median([e.correlation for e in found])))


def find_echo_piecewise(reference: NDArray[np.float32], captured: NDArray[np.float32], rate: int,
                        piece_s: float = 1.0, max_lag_s: float = MAX_LAG_S) -> EchoEstimate | None:
    """The median estimate of find_pieces (None when no piece has sound or an echo).

    Why pieces: over a whole answer of several seconds the echo path's delay can creep (a stall in the router's
    parec or pacat on a busy machine adds its buffer's worth until the speaker is next quiet), and one correlation
    over the whole answer then reads low although every second of it came back; the median of short pieces says
    how each came back."""
    return median_estimate([estimate for _, estimate in find_pieces(reference, captured, rate, piece_s, max_lag_s)])


class RoomPath:
    """What the router does to each block it reads from the speaker: room, gain, delay; nothing while it holds.

    Kept apart from the process that runs it so that it can be tested on plain arrays."""

    def __init__(self, room: NDArray[np.float32]) -> None:
        self._convolver = StreamingConvolver(room)
        self._delay = DelayLine(0)
        self._quiet_run = 0
        """Speaker samples of silence in a row, up to the last one read."""
        self._behind = False
        """The router was held up since the path last held: its echo waits in pacat, later than asked."""
        self._dry = False
        """Holding: writing nothing until the next sound."""

    def fell_behind(self) -> None:
        """The router was held up (READ_GAP_S between reads): hold at the next quiet after BEHIND_MARGIN_S."""
        self._behind = True

    def process(self, samples: NDArray[np.float32], gain_db: float, delay: int,
                room_on: bool) -> NDArray[np.float32] | None:
        """The echo of `samples` to write into the microphone, or None while holding (`holding`)."""
        if delay != self._delay.delay:
            self._delay.set_delay(delay)
        if self.holding(samples):
            return None
        roomed = self._convolver.process(samples) if room_on else samples
        return self._delay.process(roomed * np.float32(10 ** (gain_db / 20)))

    def holding(self, samples: NDArray[np.float32]) -> bool:
        """True when `samples` are silence that would only queue: the speaker has been quiet for longer than the
        path holds sound (delay line, room tail, a margin), so everything it had to say has been written.

        Why: a stall of parec or of the router on a busy machine delivers its backlog in a burst, and what the
        router writes then waits in pacat for good: the echo of every later answer comes that much later (seen in
        CI: 232 ms for 80 asked). Writing nothing while the speaker is quiet lets pacat's stream run dry; PulseAudio
        then starts it again, when the next sound comes, at its target latency, so a stall during a quiet stretch
        (where the app's inference runs, between question and answer) leaves no trace. The delay line and the
        room hold only silence by then, so nothing of an echo is dropped. The margin is QUIET_MARGIN_S, long enough
        that the app's pauses do not run pacat dry (each restart of it would move the echo), and BEHIND_MARGIN_S
        once the router has fallen behind (`fell_behind`), so that its backlog clears at the first quiet."""
        quiet = not bool(np.any(np.abs(samples) > SILENT_SAMPLE))
        self._quiet_run = self._quiet_run + len(samples) if quiet else 0
        if not quiet:
            self._dry = False
            return False
        margin = BEHIND_MARGIN_S if self._behind else QUIET_MARGIN_S
        if self._quiet_run > self._delay.delay + self._convolver.taps + round(margin * ECHO_RATE):
            self._dry, self._behind = True, False  # the backlog plays out; pacat starts afresh with the next sound
        return self._dry


_GAIN, _DELAY, _ROOM, _STALL = range(4)
"""The slots of the router process's settings file (float64 each): gain (dB), delay (samples), room on (0/1), and the
monotonic time until which it is held up (`EchoRouter.stall`). Aligned 8-byte stores: a slot is never torn."""
READY = b"ready\n"


def _route(settings_path: Path, seed: int) -> None:
    """The router process (`python -m voicecli.bench.echo_path SETTINGS SEED`): parec -> RoomPath -> pacat until
    stopped (SIGTERM) or a pipe closes, reading its settings from the file the bench writes.

    A process of its own, not a thread of the bench: a thread needs the bench's GIL, and the bench's own work
    (recorders, audio marks) held it for tens of ms at a time. Each such wait let pacat run dry, and the echo
    came that much later for the rest of the sound (measured: +19 ms over 6 s of noise beside an idle bench,
    +31-84 ms beside a thread busy in Python; a process busy on both cores moved nothing, parec, pacat and this
    process running under SCHED_FIFO). Why not multiprocessing: its spawned child re-runs the parent's main
    script, which breaks any script that uses the bench without a __main__ guard."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if realtime_prefix():
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    settings = np.memmap(settings_path, dtype=np.float64, mode="r", shape=(4,))
    reader = subprocess.Popen(
        [*realtime_prefix(), "parec", "-d", SPEAKER_MONITOR, "--format=float32le", f"--rate={ECHO_RATE}",
         "--channels=1", "--raw", f"--latency-msec={READ_LATENCY_MS}"], stdout=subprocess.PIPE)
    writer = subprocess.Popen(
        [*realtime_prefix(), "pacat", "--playback", "-d", MIC_SINK, "--format=float32le", f"--rate={ECHO_RATE}",
         "--channels=1", "--raw", f"--latency-msec={WRITE_LATENCY_MS}", "--stream-name=voicecli-echo-path"],
        stdin=subprocess.PIPE)
    path = RoomPath(room_impulse_response(seed))
    try:
        stdout, stdin = reader.stdout, writer.stdin
        assert isinstance(stdout, io.BufferedReader) and stdin is not None
        sys.stdout.buffer.write(READY)
        sys.stdout.buffer.flush()
        pending = b""
        last_read = time.monotonic()
        while data := stdout.read1(4096):
            if (now := time.monotonic()) - last_read > READ_GAP_S:
                path.fell_behind()
            last_read = now
            pending += data
            usable = len(pending) - len(pending) % 4
            samples = np.frombuffer(pending[:usable], dtype="<f4")
            pending = pending[usable:]
            if (held := float(settings[_STALL]) - time.monotonic()) > 0:
                time.sleep(held)
            echo = path.process(samples, float(settings[_GAIN]), int(settings[_DELAY]), bool(settings[_ROOM]))
            if echo is not None:
                stdin.write(echo.astype("<f4").tobytes())
                stdin.flush()
    except (BrokenPipeError, ValueError):
        pass
    finally:
        for process in (reader, writer):
            process.terminate()
            process.wait(timeout=5)


class EchoRouter:
    """The echo path, running in a process of its own: speaker monitor -> room -> gain -> delay -> microphone.
    A context manager.

    `gain_db` and `target_delay_ms` may change while it runs (between answers); `calibrate()` measures the router's
    own latency so that the delay it adds makes the echo arrive `target_delay_ms` after the speaker played it.
    """

    def __init__(self, pulse: PrivatePulse, target_delay_ms: float, gain_db: float, seed: int = 0) -> None:
        self.pulse = pulse
        self.gain_db = gain_db
        self.target_delay_ms = target_delay_ms
        self.own_latency_ms: float | None = None
        """The router's own latency (parec + processing + pacat), once calibrated."""
        self.calibration_lags_ms: list[float] = []
        """What each calibration burst measured (the spread says how steady the path was then)."""
        self._calibrating = False
        """True while calibrating: the burst goes through unchanged (no room, no delay, no gain), so only the
        router's latency is measured."""
        self._settings_path = pulse.base / f"echo-path-{id(self)}.settings"
        self._settings = np.memmap(self._settings_path, dtype=np.float64, mode="w+", shape=(4,))
        self._seed = seed
        self._process: subprocess.Popen[bytes] | None = None
        self._apply()

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "voicecli.bench.echo_path", str(self._settings_path), str(self._seed)],
            env=self.pulse.child_env(), stdout=subprocess.PIPE)
        stdout = self._process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], 30)
        if not ready or stdout.readline() != READY:
            self._stop()
            raise RuntimeError("the echo path's router process did not start (python -m voicecli.bench.echo_path)")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def _stop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        self._settings_path.unlink(missing_ok=True)

    @property
    def effective_delay_ms(self) -> float | None:
        """The echo's delay after the speaker as it will be: the target, or the router's own latency when that is
        longer (None before `calibrate`)."""
        if self.own_latency_ms is None:
            return None
        return max(self.target_delay_ms, self.own_latency_ms)

    def set_gain_db(self, gain_db: float) -> None:
        self.gain_db = gain_db
        self._apply()

    def set_target_delay_ms(self, delay_ms: float) -> None:
        """Change the echo's delay; call it while the speaker is quiet (a change drops or inserts samples)."""
        self.target_delay_ms = delay_ms
        self._apply()

    def stall(self, seconds: float) -> None:
        """Hold the router up for `seconds` from now, as a busy machine does (parec records on meanwhile): for the
        tests of what a stall leaves behind."""
        self._settings[_STALL] = time.monotonic() + seconds

    def _apply(self) -> None:
        """Hand the router process the settings: the delay it adds is the target minus its own latency."""
        added_ms = max(0.0, self.target_delay_ms - (self.own_latency_ms or 0.0))
        self._settings[_GAIN] = 0.0 if self._calibrating else self.gain_db
        self._settings[_DELAY] = 0 if self._calibrating else round(added_ms * ECHO_RATE / 1000)
        self._settings[_ROOM] = 0.0 if self._calibrating else 1.0

    def calibrate(self, work: Path, seed: int = 1) -> EchoEstimate:
        """Measure the router's own latency: play CALIBRATION_BURSTS noise bursts on the speaker with no added delay
        and no room, find each in the microphone, and take the median; then set the delay line to the target minus
        that. Returns the median estimate; `calibration_lags_ms` keeps each burst's lag.

        Without the room a burst comes back as a clean copy (correlation ~0.9+ at the lag): through the room only
        the direct path's share of the energy correlates at one lag, which on a loaded machine fell below what
        tells a real echo from chance (0.34 in CI). Each burst is measured on its own (measure_path waits well past
        the router's hold between them), so each starts the path from quiet, as every answer does."""
        self._calibrating = True
        self._apply()
        rng = np.random.default_rng(seed)
        found: list[EchoEstimate] = []
        try:
            for n in range(CALIBRATION_BURSTS):
                burst = rng.standard_normal(round(CALIBRATION_S * ECHO_RATE)) * 10 ** (CALIBRATION_DBFS / 20)
                path = work / f"echo-calibration-{n}.wav"
                write_wav_int16(path, np.concatenate([np.zeros(ECHO_RATE // 5), burst, np.zeros(ECHO_RATE // 2)])
                                .astype(np.float32), ECHO_RATE)
                estimate = measure_path(self.pulse, path, CALIBRATION_S)
                if estimate is not None:
                    found.append(estimate)
        finally:
            median = median_estimate(found)
            self.calibration_lags_ms = [round(e.lag_s * 1000, 1) for e in found]
            self.own_latency_ms = None if median is None else median.lag_s * 1000
            self._calibrating = False
            self._apply()
        if median is None:
            raise RuntimeError("the echo path carried nothing from the speaker to the microphone")
        return median


def measure_path(pulse: PrivatePulse, wav: Path, seconds: float) -> EchoEstimate | None:
    """Play `wav` on the speaker while recording the speaker's monitor and the microphone, and find the speaker's
    sound in the microphone (the lag is on the shared monotonic clock of the two recorders, ~10 ms each).

    By MEASURE_PIECE_S pieces, their medians: on a loaded machine pacat can run dry mid-sound, and the rest then comes
    back ~25 ms later (seen: pieces at 27 then 52 ms, one correlation over the whole 0.69, each piece 0.88+)."""
    return median_estimate(measure_pieces(pulse, wav, seconds))


def measure_pieces(pulse: PrivatePulse, wav: Path, seconds: float,
                   piece_s: float = MEASURE_PIECE_S) -> list[EchoEstimate]:
    """`measure_path`'s estimates piece by piece, in order (empty when the speaker played nothing): how the echo's
    delay moved while the sound played."""
    monitor = pulse.record(SPEAKER_MONITOR, rate=ECHO_RATE)
    mic = pulse.record(MIC_SOURCE, rate=ECHO_RATE)
    try:
        time.sleep(0.3)
        subprocess.run(["paplay", str(wav)], env=pulse.child_env(), check=True, timeout=60)
        time.sleep(MAX_LAG_S + 0.2)
        played = monitor.samples()
        onset = np.flatnonzero(np.abs(played) > 10 ** ((CALIBRATION_DBFS - 20) / 20))
        if onset.size == 0:
            return []
        start = int(onset[0])
        at = monitor.time_of_frame(start)
        reference = played[start:start + round(seconds * ECHO_RATE)]
        mic_start = round(mic.frame_at(at))
        captured = mic.samples(mic_start, mic_start + len(reference) + round(MAX_LAG_S * ECHO_RATE))
        return [estimate for _, estimate in find_pieces(reference, captured, ECHO_RATE, piece_s)]
    finally:
        monitor.stop()
        mic.stop()


if __name__ == "__main__":
    _route(Path(sys.argv[1]), int(sys.argv[2]))
