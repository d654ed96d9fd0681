"""A private, user-level PulseAudio daemon with a virtual speaker and microphone, and recorders on it.

Why in the product: `voicecli bench turns` speaks questions into a virtual microphone and listens to the answers on
a virtual speaker, through the very same device path as a user's (PortAudio -> ALSA pulse plugin -> PulseAudio),
on machines that have no sound card. The tests use the same equipment (tests/pulse.py re-exports this module), so
playback and capture are tested against a real, real-time clocked device, not a mock. A private base directory per
run keeps concurrent sessions (and other users' daemons) from seeing each other.

The .pa recipe follows /work/shared/notes/headless-audio.md:
- ``vspeaker``: a 48 kHz stereo null sink, the default sink; what was played is recorded back from
  ``vspeaker.monitor``.
- ``vmic_in`` + remap source ``vmic``: the default source; "speak" into it with ``paplay -d vmic_in``.
- a silence source looped into every sink keeps the sinks running, otherwise a new recorder gets no data for up
  to ~2 s and the start of a prompt is lost.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
import threading
import time
import wave
from pathlib import Path
from types import TracebackType
from typing import Self

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.levels import rms_dbfs

SPEAKER_SINK = "vspeaker"
SPEAKER_MONITOR = "vspeaker.monitor"
MIC_SINK = "vmic_in"
MIC_SOURCE = "vmic"
SINK_RATE = 48000
LOCAL_S = 2.0
"""How far after a frame the recorder's read times are used to date it (see Recorder.time_of_frame)."""

_PA_SCRIPT = f"""\
load-module module-native-protocol-unix auth-anonymous=1
load-module module-null-sink sink_name={SPEAKER_SINK} rate={SINK_RATE} channels=2
load-module module-null-sink sink_name={MIC_SINK} rate={SINK_RATE} channels=1
load-module module-remap-source source_name={MIC_SOURCE} master={MIC_SINK}.monitor channels=1
load-module module-null-source source_name=silence
load-module module-loopback source=silence sink={SPEAKER_SINK} latency_msec=30
load-module module-loopback source=silence sink={MIC_SINK} latency_msec=30
set-default-sink {SPEAKER_SINK}
set-default-source {MIC_SOURCE}
"""

_ENV_KEYS = ("XDG_RUNTIME_DIR", "PULSE_RUNTIME_PATH", "PULSE_STATE_PATH", "PULSE_SERVER")


class PulseUnavailable(RuntimeError):
    """The pulseaudio binaries are missing or the daemon did not come up."""


class PrivatePulse:
    """Start/stop a private PulseAudio daemon and point this process (and its children) at it.

    Use as a context manager. While active, ``os.environ`` carries the PULSE_* variables so that PortAudio (after
    ``reinitialize_portaudio()``), parec and paplay all talk to this daemon only.
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self._own_base = base_dir is None
        self.base = Path(tempfile.mkdtemp(prefix="voicecli-pulse-")) if base_dir is None else base_dir
        self.runtime = self.base / "runtime"
        self.log_path = self.base / "pulse.log"
        self._saved_env: dict[str, str | None] = {}
        self.started = False
        self.warm_up_s = 0.0

    @property
    def env(self) -> dict[str, str]:
        """The environment entries a client needs to reach this daemon."""
        return {
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PULSE_RUNTIME_PATH": str(self.runtime / "pulse"),
            "PULSE_STATE_PATH": str(self.base / "state"),
            "PULSE_SERVER": f"unix:{self.runtime / 'pulse' / 'native'}",
        }

    def child_env(self) -> dict[str, str]:
        """A full environment for subprocesses (pactl, parec, paplay)."""
        return {**os.environ, **self.env}

    def start(self, timeout_s: float = 15.0) -> None:
        for tool in ("pulseaudio", "pactl", "parec", "paplay"):
            if shutil.which(tool) is None:
                raise PulseUnavailable(f"{tool} not found: apt-get install pulseaudio pulseaudio-utils")
        self.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.runtime / "pulse").mkdir(mode=0o700, exist_ok=True)
        (self.base / "state").mkdir(exist_ok=True)
        os.chmod(self.runtime, 0o700)
        script = self.base / "voicecli.pa"
        script.write_text(_PA_SCRIPT)
        cmd = [
            "pulseaudio", "--daemonize=yes", "--system=false", "-n", "-F", str(script),
            "--exit-idle-time=-1", "--disallow-exit=yes", "--use-pid-file=yes",
            "--realtime=yes", "--high-priority=yes", f"--log-target=file:{self.log_path}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, env=self.child_env(), capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise PulseUnavailable(f"pulseaudio failed to start (rc={proc.returncode}): {proc.stderr.strip()}")
        deadline = time.monotonic() + timeout_s
        while True:
            probe = subprocess.run(["pactl", "info"], env=self.child_env(), capture_output=True, text=True)
            if probe.returncode == 0 and SPEAKER_SINK in probe.stdout:
                break
            if time.monotonic() > deadline:
                raise PulseUnavailable(f"pulseaudio did not answer: {probe.stderr.strip()} (log {self.log_path})")
            time.sleep(0.1)
        self.started = True
        self._apply_env()
        self.warm_up_s = self._wait_until_realtime(timeout_s)

    def _wait_until_realtime(self, timeout_s: float) -> float:
        """Block until the speaker's monitor delivers audio at the wall-clock rate; returns the seconds waited.

        Measured: for the first ~1-2 s after start (longer on a loaded machine) the null sink runs at ~60% of real
        time, which stretches whatever is played then. Tests must not start before it settles.
        """
        rate = 8000
        rec = self.record(rate=rate)
        t0 = last_t = time.monotonic()
        last_n = 0
        good = 0
        try:
            while time.monotonic() - t0 < timeout_s:
                time.sleep(0.25)
                now, n = time.monotonic(), rec.captured_frames()
                good = good + 1 if n > 0 and (n - last_n) >= 0.9 * (now - last_t) * rate else 0
                if good >= 3:
                    break
                last_t, last_n = now, n
        finally:
            rec.stop()
        return time.monotonic() - t0

    def stop(self) -> None:
        if self.started:
            subprocess.run(["pulseaudio", "--kill"], env=self.child_env(), capture_output=True, timeout=15)
            self.started = False
        self._restore_env()
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def _apply_env(self) -> None:
        for key in _ENV_KEYS:
            self._saved_env[key] = os.environ.get(key)
        os.environ.update(self.env)

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------------------------

    def record(self, source: str = SPEAKER_MONITOR, rate: int = SINK_RATE, channels: int = 1) -> Recorder:
        """Start recording ``source`` (float32) in the background; call ``.stop()`` for the samples."""
        return Recorder(self, source, rate, channels)

    def play_into_mic(self, wav_path: Path, wait: bool = True) -> subprocess.Popen[bytes]:
        """Play a WAV file into the virtual microphone (``vmic`` hears it); with ``wait``, return once it has played."""
        proc = subprocess.Popen(["paplay", "-d", MIC_SINK, str(wav_path)], env=self.child_env())
        if wait:
            proc.wait(timeout=120)
        return proc


class Recorder:
    """A running ``parec`` whose raw float32 output is drained by a thread (so the pipe never fills)."""

    def __init__(self, pulse: PrivatePulse, source: str, rate: int, channels: int) -> None:
        self.rate = rate
        self.channels = channels
        cmd = [
            "parec", "-d", source, "--format=float32le", f"--rate={rate}", f"--channels={channels}",
            "--raw", "--latency-msec=10",
        ]  # fmt: skip
        self._proc = subprocess.Popen(cmd, env=pulse.child_env(), stdout=subprocess.PIPE)
        self.started_at = time.monotonic()
        self._chunks: list[bytes] = []
        self._marks: list[tuple[float, int]] = []
        self._thread = threading.Thread(target=self._drain, name="parec-drain", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        stdout = self._proc.stdout
        assert isinstance(stdout, io.BufferedReader)
        total = 0
        while True:
            data = stdout.read1(65536)
            if not data:
                return
            self._chunks.append(data)
            total += len(data)
            self._marks.append((time.monotonic(), total // (4 * self.channels)))

    def time_of_frame(self, index: float) -> float:
        """Estimated time.monotonic() at which captured frame ``index`` was recorded.

        Each read at time t that ends at frame n says frame i was captured no later than t - (n - i) / rate; the
        tightest (smallest) such bound is the estimate (error: parec's own latency, ~10 ms). Only the reads of the
        LOCAL_S after the frame are used when there are any: a daemon that stalled once under load and never caught
        up shifts every later frame, and a bound from before the stall would then be wrong by the stall.
        """
        marks = np.array(self._marks, dtype=np.float64)
        near = marks[(marks[:, 1] >= index) & (marks[:, 1] <= index + LOCAL_S * self.rate)]
        marks = near if len(near) else marks
        return float(np.min(marks[:, 0] - (marks[:, 1] - index) / self.rate))

    def recent_dbfs(self, seconds: float = 0.25) -> float:
        """RMS level of the last `seconds` captured (for "is something audible right now" checks)."""
        want = int(seconds * self.rate) * 4 * self.channels
        tail = b"".join(self._chunks[-64:])[-want:]
        tail = tail[: len(tail) - len(tail) % 4]
        return rms_dbfs(np.frombuffer(tail, dtype="<f4"))

    def frame_at(self, when: float) -> float:
        """The frame index being captured at time.monotonic() ``when`` (the inverse of ``time_of_frame``)."""
        marks = np.array(self._marks, dtype=np.float64)
        near = marks[(marks[:, 0] >= when) & (marks[:, 0] <= when + LOCAL_S)]
        marks = near if len(near) else marks
        return float(np.max(marks[:, 1] - (marks[:, 0] - when) * self.rate))

    def samples(self, start: int = 0, end: int | None = None) -> NDArray[np.float32]:
        """A copy of captured frames [start, end) so far, while recording goes on (mono: 1-D; else frames x ch)."""
        frame_bytes = 4 * self.channels
        raw = b"".join(list(self._chunks))
        raw = raw[: len(raw) - len(raw) % frame_bytes]
        data: NDArray[np.float32] = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        if self.channels > 1:
            data = data.reshape(-1, self.channels)
        return data[max(0, start): end]

    def captured_frames(self) -> int:
        return sum(len(c) for c in self._chunks) // (4 * self.channels)

    def stop(self) -> NDArray[np.float32]:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._thread.join(timeout=10)
        raw = b"".join(self._chunks)
        raw = raw[: len(raw) - len(raw) % (4 * self.channels)]
        samples = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        return samples.reshape(-1, self.channels) if self.channels > 1 else samples


def write_wav_int16(path: Path, samples: NDArray[np.float32], rate: int) -> None:
    """Write mono float samples in [-1, 1] as a 16-bit WAV (for paplay), rounded to the nearest step."""
    pcm = np.round(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
