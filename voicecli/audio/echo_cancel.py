"""Acoustic echo cancellation of the microphone: WebRTC AEC3 fed with what the speaker really played.

Why AEC3 through pywebrtc-audio: chosen by measurement (results/bench/aec-choice/results.md, scripts/aec_choice.py):
on real Kokoro speech through a synthetic room at 20-120 ms and 0/+6 dB echo over the near-end voice it removes
35-42 dB of echo (Speex: 12-21 dB), keeps more of the near-end voice in double talk than livekit's AEC3 (correlation
0.56-0.80 vs 0.48-0.68), costs ~0.2 ms of CPU per 10 ms frame (livekit ~0.28 ms), and is a 0.4 MB cp312 wheel that
needs only numpy (livekit: 12 MB plus protobuf and a Rust runtime). This module is the one place that imports it,
lazily, so nothing else pays for it.

How a capture block is paired with the reference (voicecli.audio.far_end): both live on the monotonic clock, the
reference stamped with its DAC time. The capture stream is laid on the same timeline by sample count, from the
earliest of its callback times (they only jitter later, never earlier), and held there while the reference stays one
stretch: both count the sound card's samples (see `EchoCanceller._place` and voicecli.audio.far_end). The bulk delay
between them (the acoustic path plus the input buffering no API reports well) is measured with GCC-PHAT
(voicecli.audio.echo_delay) every `track_every_s` of far-end audio. AEC3 tracks a delay of 0-`AEC3_RANGE_S` to the
sample by itself, so the first clear estimate shifts the reference only when the delay falls outside that (a
reference later than its echo, an echo later than that range): then AEC3 sees a small causal delay
(`RESIDUAL_DELAY_S`). A capture that clearly hears the far end but yields no clear delay for `UNCLEAR_S` makes the
canceller untrusted (`trusted`), so the caller can fall back to the level gate; a clear estimate trusts it again.

When the bulk delay changes later (a device's latency after a stream restart, a sound server that fell behind), the
reference is shifted by the change, without a reset, so AEC3 keeps seeing the alignment it adapted to; for a shorter
delay that means reading the reference ahead of the capture's time, which works as far as the player has written it (its
device latency ahead, ~70 ms here). Each hold and barge-in restarts the output stream, and in bench duplex the delay
moved 6-14 ms at each, so these shifts add up over a session; only a change beyond that restarts AEC3 (see `_use`).
(Those moves were the bench's own echo path, whose restarts followed the app's: the app's timelines hold to a fraction
of a ms there, results/bench/stretch-placement-20261206. A real device may still move; this stays.) Why not leave it to
AEC3: it follows a longer delay within ~0.5 s, but a shorter one slowly (measured on a synthetic room, answers whose
delay fell by 80 ms: 8-9 dB ERLE over the answer, ~3 s of leaking echo; followed here: the first ~0.5 s of the
answer, before two estimates agree on the new delay, then ~60 dB). Why two agreeing estimates: one estimate can land
on an early reflection, and a shift by a wrong amount costs AEC3 its alignment. Hence also the frequent tracking
(every 0.2 s, ~5.5 ms of CPU each while the far end plays): the leak lasts until the change is confirmed. So from
when audio played after a restart of the output stream (a cut of the reference) reaches the capture until an
estimate over that audio confirms the delay, the canceller says it is not `settled`, and the level gate guards
meanwhile.

Until the capture has been found to hear the far end (a first clear delay estimate), the capture passes through
uncancelled while AEC3 still adapts on it. Why: an AEC3 that has not yet seen its echo suppresses the near end
hard during far-end activity (measured on the test mixtures of tests/audio/echo_mixtures.py: a user who starts
talking 0.5 s into an answer on headphones lost 36 dB of their first half second; in CI's barge-in test "What is
two plus two?" was heard as "us too."); with no echo there is nothing to cancel, and with one the level gate guards
until AEC3 is trusted anyway. The first estimate comes ~0.4-0.7 s into the first answer; from then on AEC3's output
is used (~36 dB of echo removed from 1 s on, the same mixtures).
A capture that stays quiet while the far end plays (`echo_absent`: headphones, or a muted speaker) needs no guard.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.double_talk import DoubleTalkDetector
from voicecli.audio.echo_delay import DelayEstimate, estimate_delay
from voicecli.audio.echo_dump import EchoDump
from voicecli.audio.far_end import FarEndReference
from voicecli.audio.levels import SILENCE_DBFS, rms_dbfs
from voicecli.audio.rates import SPEECH_RATE

__all__ = [
    "BINDING",
    "ECHO_MODES",
    "RESIDUAL_DELAY_S",
    "EchoCanceller",
    "EchoCancellerUnavailable",
    "EchoStats",
    "binding_status",
    "erle_db",
    "new_aec3",
]

log = logging.getLogger(__name__)

Audio = NDArray[np.float32]

ECHO_MODES: Final = ("aec", "gate", "off")
"""audio.echo: cancel the echo (the level gate only as a fallback), gate the microphone by level, or neither."""

BINDING: Final = "pywebrtc_audio"
"""The module providing AEC3 (the PyPI package pywebrtc-audio)."""

FRAME: Final = SPEECH_RATE // 100
"""AEC3 works on 10 ms frames."""

AEC3_RANGE_S: Final = 0.3
"""Bulk delays AEC3's own delay estimator handles with the reference paired by timestamp alone (measured: 20-400 ms
converge within 0.5 s; shifting the reference mid-answer instead cost ~2.5 s of re-convergence)."""

RESIDUAL_DELAY_S: Final = 0.04
"""The delay left for AEC3 to find itself when the reference has to be shifted: causal with room for jitter."""

FAR_ACTIVE_DBFS: Final = -50.0
"""A reference window quieter than this is treated as "nothing playing" (no delay estimate, no ERLE counted)."""

HEARD_DBFS: Final = -55.0
"""A capture window louder than this while the far end plays is expected to contain its echo."""

UNCLEAR_S: Final = 4.0
"""Far-end audio heard in the capture without a clear delay (consecutive tracking windows) before the canceller is
untrusted."""

TRACK_EVERY_S: Final = 0.2
"""How often the bulk delay is re-estimated while the far end plays (see the module docstring: a change is followed
once two estimates agree on it)."""

FOLLOW_MIN_S: Final = 0.006
"""A change of the bulk delay smaller than this is left to AEC3's own tracking. Why not smaller: each shift of the
reference makes AEC3 re-find its alignment and leak meanwhile; a sound server's delay wanders by a few ms, which AEC3
follows unaided. Measured by replaying the recordings of three `bench duplex` runs (scripts/duplex_replay.py): ERLE
median per echo-only answer 23.3 / 23.6 / 23.8 dB following every change of 2 ms and more, 25.3 / 27.2 / 29.2 at
6 ms (chosen on the first set); live, duplex-20261205-follow6: 26.2 dB against 23.3 in duplex-20261205-reset, and
23.0 in a shorter repeat (-follow6-b, 8 answers): the live gain is not yet shown beyond run-to-run spread."""

AGREE_S: Final = 0.001
"""Two consecutive estimates this close confirm a changed bulk delay."""

RELAY_S: Final = 1.0
"""The latest capture callbacks whose earliest lays the capture's timeline again when the reference begins a new
stretch (see EchoCanceller._place)."""

LATE_S: Final = 0.05
EARLY_S: Final = 0.01
LATE_FOR_S: Final = 1.0
"""Capture callbacks that all come more than LATE_S after the capture timeline, or more than EARLY_S before it, for
LATE_FOR_S lay it again (see EchoCanceller._place); a burst after a stall does not. Why 10 ms early: within a
stretch the callbacks' earliest wandered by up to ~5 ms (steps of up to 81 samples in duplex-20261206-clock); two
cards whose clocks differ by 100 ppm part by 10 ms in 100 s."""

READ_AHEAD_WINDOWS: Final = 10
"""Tracking windows (2 s) over which the least read-ahead the player allowed is kept (`_read_ahead_limit`)."""

_NOT_SEEN: Final = 1 << 62
"""No capture frame was processed since the last track (nothing to bound the read-ahead with)."""

SETTLE_FAR_S: Final = 0.3
"""Far-end audio played since a restart of the output stream before a delay estimate may confirm the echo's delay
(`EchoCanceller.settled`): the 1 s estimation window must hold mostly audio the restarted stream played, or the
estimate reads the old delay."""

CONVERGE_S: Final = 1.5
"""Far-end audio AEC3 must have processed (since it started or was reset) before its output is relied on: an adapting
filter lets the first fraction of a second of echo through, which the voice detector would take for the user."""

LEAK_COHERENCE: Final = 0.5
"""The coherence with the far end (around the echo's delay) at which a frame of the canceller's output is echo it let
through (`EchoCanceller.leaking`). Why: AEC3 now and then passes the echo nearly whole, the canceller settled and
trusted: a sentence after a 0.2 s gap at the capture's own level (duplex-20261206-sure), the first half second after a
restart whose delay moved 7 ms (duplex-20261206-block10-rep); each made the one false barge-in of its run. Echo
passed is the far end through the room, coherent with it (those two: 0.5-0.9 over the frames that barged in), where
a user's voice is not. Replayed on the echo dumps of ten runs with the output silenced in every frame at 0.5 or more
(results/bench/echo-coherence-20261206): the holds from the echo alone 65 -> 35, the interruptions stopped 146 -> 145
of 180 at the same p50, the false barge-ins past the first seconds 1 -> 1 (one gone, one new). Live with it
(duplex-20261206-leakgate): 0 false barge-ins, 14 of 18 interruptions stopped (all those under half over the echo),
p50 214 ms."""


class EchoCancellerUnavailable(RuntimeError):
    """The AEC binding cannot be loaded; the message says how to install it."""


def _load_binding() -> Any:
    try:
        return importlib.import_module(BINDING)
    except ImportError as exc:
        raise EchoCancellerUnavailable(
            f"echo cancellation needs the pywebrtc-audio package ({exc}); reinstall with scripts/setup, or set "
            "audio.echo = \"gate\""
        ) from exc


def new_aec3(noise_suppression: bool = False) -> Any:
    """A fresh WebRTC audio processor as the canceller runs it (AEC3 at 16 kHz mono, high-pass on, no stream delay:
    the alignment is the canceller's own): `process(capture, far)` per block of whole 10 ms frames. Public so that
    a replay of a live session's dump (voicecli.audio.echo_dump) runs the very same AEC3."""
    return _load_binding().AudioProcessor(SPEECH_RATE, 1, echo_cancellation=True, high_pass_filter=True,
                                          noise_suppression=noise_suppression, stream_delay_ms=0)


def binding_status() -> tuple[bool, str]:
    """Whether the AEC binding loads, and a line saying which (for `voicecli doctor`)."""
    try:
        module = _load_binding()
    except EchoCancellerUnavailable as exc:
        return False, str(exc)
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("pywebrtc-audio")
    except PackageNotFoundError:
        found = "?"
    return True, f"WebRTC AEC3 via pywebrtc-audio {found} ({getattr(module, '__file__', BINDING)})"


def erle_db(before: Audio, after: Audio) -> float:
    """Echo return loss enhancement: how much quieter the echo is after cancellation, in dB.

    Pass the capture and the cancelled output over a stretch where only the far end plays (no one speaking):
    ERLE = level(before) - level(after). Both silent (or empty) reads 0.0.
    """
    lo, hi = rms_dbfs(after), rms_dbfs(before)
    return 0.0 if hi <= SILENCE_DBFS else hi - lo


@dataclass
class EchoStats:
    """Running figures of one canceller (the duplex bench and doctor read them)."""

    frames: int = 0
    """10 ms capture frames processed."""
    far_frames: int = 0
    """Of them, frames during which the far end was playing (reference above FAR_ACTIVE_DBFS)."""
    in_energy: float = 0.0
    """Sum of squared capture samples over the far-end frames (before cancellation)."""
    out_energy: float = 0.0
    """Sum of squared output samples over the same frames (after cancellation)."""
    estimates: int = 0
    """Delay estimates attempted (windows with the far end playing)."""
    clear_estimates: int = 0
    """Of them, clear ones (used to align the reference)."""

    @property
    def erle_db(self) -> float:
        """ERLE over every far-end frame so far; true ERLE only when nobody spoke meanwhile (near-end speech counts
        as echo that was "not removed", so double talk lowers it). 0.0 before any far-end frame."""
        if self.in_energy <= 0.0:
            return 0.0
        return 10 * math.log10(self.in_energy / max(self.out_energy, 1e-20))


class EchoCanceller:
    """Capture blocks (16 kHz mono float32, any length, each stamped with its callback's monotonic time) in,
    echo-cancelled blocks out. One thread calls ``process``; the reference is pushed from the audio thread.

    - reference: what the speaker played (voicecli.audio.far_end.FarEndReference).
    - noise_suppression: also run WebRTC's noise suppressor on the capture.
    - max_delay_s / lookahead_s: the bulk delay searched, from the reference lagging the timestamps by
      lookahead_s to the echo arriving max_delay_s after its DAC time.
    - track_every_s / window_s: how often and over how much audio the delay is re-estimated.
    - dump: write what each block was fed (voicecli.audio.echo_dump), to replay a live session's own inputs.
    """

    def __init__(
        self,
        reference: FarEndReference,
        *,
        noise_suppression: bool = False,
        max_delay_s: float = 0.4,
        lookahead_s: float = 0.1,
        track_every_s: float = TRACK_EVERY_S,
        window_s: float = 1.0,
        dump: EchoDump | None = None,
    ) -> None:
        self._apm = new_aec3(noise_suppression)
        self.dump = dump
        """Where each block's inputs are written as they come (voicecli.audio.echo_dump; audio.echo_dump), or None."""
        self.reference = reference
        self.rate = SPEECH_RATE
        self.stats = EchoStats()
        self._max_delay = round(max_delay_s * self.rate)
        self._lookahead = round(lookahead_s * self.rate)
        self._track_every = round(track_every_s * self.rate)
        self._window = round(window_s * self.rate)
        self._carry = np.zeros(0, np.float32)  # capture samples short of a whole frame
        self._anchor: int | None = None  # reference index of capture sample 0
        self._off_for = 0  # capture samples since callbacks began to come LATE_S after (EARLY_S before) the timeline
        self._off_min = 0  # the earliest offset among those callbacks
        self._offsets: deque[tuple[int, int]] = deque()  # (capture samples taken in, offset) over the last RELAY_S
        self._stretches = 0  # the reference's stretches seen so far
        self._count = 0  # capture samples taken in (the next one's index on the capture timeline)
        self._history = np.zeros(self._window, np.float32)  # the latest raw capture, for delay estimation
        self._since_estimate = 0
        self._shift = 0  # the reference is read this many samples before the capture's own time
        self.delay: DelayEstimate | None = None
        """The latest clear bulk-delay estimate (None until the far end has been heard)."""
        self._unclear = 0
        self._unclear_limit = max(1, math.ceil(UNCLEAR_S / track_every_s))
        self._aligned: int | None = None  # the bulk delay (samples) the current shift was set for
        self._candidate: int | None = None  # the bulk delay of the latest clear estimate
        self._adapted = 0  # far-end frames processed since AEC3 started or was reset
        self._quiet_windows = 0  # tracking windows in which the far end played and the capture stayed quiet
        self._ahead_min = _NOT_SEEN  # the least the reference reached past the capture since the last track
        self._ahead_mins: deque[int] = deque(maxlen=READ_AHEAD_WINDOWS)
        self._cuts = 0  # the reference's cuts (output-stream restarts) seen so far
        self._since_cut: int | None = None  # far-end frames played since a restart whose delay is not yet confirmed
        self._cut_index = 0  # the reference index the restarted stream's audio starts at
        self.trusted = True
        """False while the far end is heard but its delay cannot be estimated: use the level gate meanwhile."""
        self._double_talk = DoubleTalkDetector(self.rate)  # the raw capture, the far end around the echo
        self._leak = DoubleTalkDetector(self.rate)  # the output, the far end around the echo: echo let through

    @property
    def converged(self) -> bool:
        """True once AEC3 has adapted to CONVERGE_S of far-end audio since it started or was reset."""
        return self._adapted * FRAME >= CONVERGE_S * self.rate

    @property
    def settled(self) -> bool:
        """False from when the far end played after a restart of the output stream (the player's flush at every hold and
        barge-in, seen as a cut of the reference) reaches the capture, until a clear estimate over at least SETTLE_FAR_S
        of it agrees with the delay the reference is aligned for (unchanged, or followed). Why: a restart moved the
        echo's delay by 6-14 ms in bench duplex (see the module docstring), and until the change is confirmed (~0.4-0.6
        s into the next answer) AEC3 leaks; in bench duplex (duplex-20261205-readahead-b) all three false barge-ins came
        0.28-0.46 s into an answer, the level gate not guarding. The caller guards with the gate meanwhile
        (voicecli.listen.echo_path). Why not from the cut itself: the echo still coming in then is of what played
        before it, at the delay AEC3 is aligned for, and what follows a hold's flush is the user's voice, which the
        gate, comparing it with the answer's level, would mute (duplex-20261205-daclevel: 13 of 18 interruptions
        heard, p50 1,076 ms)."""
        return self._since_cut is None or self._since_cut == 0

    @property
    def double_talk(self) -> bool:
        """True while the capture holds more than the far end's echo alone over the latest half second: a voice (or
        another sound) over the answer, told by its incoherence with the far end around the echo's delay
        (voicecli.audio.double_talk). Only once the delay is known and confirmed (`settled`)."""
        return self._aligned is not None and self.trusted and self.settled and self._double_talk.near_end

    @property
    def leaking(self) -> bool:
        """True while the latest frame of the output was coherent with the far end around the echo's delay
        (LEAK_COHERENCE): echo AEC3 let through, not a voice. Only once the delay is known, and only where the far
        end plays and the output is heard (voicecli.audio.double_talk counts no other frame)."""
        scores = self._leak.scores
        latest = scores[-1] if self._aligned is not None and scores else None
        return latest is not None and latest >= LEAK_COHERENCE

    @property
    def echo_heard(self) -> bool:
        """True once a clear delay estimate showed the capture hears the far end: from then on the output is
        AEC3's; before, the capture passes through unchanged (see the module docstring)."""
        return self.delay is not None

    @property
    def echo_absent(self) -> bool:
        """True while no echo was ever found and the capture stayed quiet through a window of far-end audio
        (headphones): nothing to cancel, nothing to guard against."""
        return self.delay is None and self._quiet_windows > 0

    @property
    def delay_s(self) -> float | None:
        """The estimated bulk delay from DAC time to the microphone callback (None until estimated)."""
        return None if self.delay is None else (self.delay.lag - self._lookahead) / self.rate

    def process(self, samples: Audio, at: float) -> tuple[Audio, float]:
        """Cancel the echo in one capture block whose last sample was taken at monotonic `at`.

        Returns the cleaned samples (whole 10 ms frames: up to one frame is held for the next block) and the time
        of the last one. Before anything was played the block passes through unchanged.
        """
        now_index = self.reference.index(at)
        if now_index is None:
            return samples, at
        if self.reference.cuts != self._cuts:
            self._cuts = self.reference.cuts
            if self._aligned is not None:  # a delay was found before the restart: it has to be confirmed again
                self._since_cut = 0
                self._cut_index = self.reference.cut_index or 0
        n = len(samples)
        offset = now_index - (self._count + n)  # reference index of capture sample 0 per this callback
        anchor = self._place(offset, n)
        self._remember(samples)
        pending = np.concatenate([self._carry, samples.astype(np.float32, copy=False)])
        usable = len(pending) - len(pending) % FRAME
        self._carry = pending[usable:].copy()
        first = anchor + self._count - (len(pending) - n)  # reference index of pending[0]
        self._count += n
        if usable == 0:
            return np.zeros(0, np.float32), at
        self._ahead_min = min(self._ahead_min, self.reference.end - (first + usable))
        far = self.reference.read_index(first - self._shift, usable)
        cancelled = np.asarray(self._apm.process(pending[:usable], far), dtype=np.float32)
        far_dtd = None
        if self._aligned is not None:
            lead = first - self._aligned + self._double_talk.lead  # its lags reach either side of the bulk delay
            far_dtd = self.reference.read_index(lead, usable)
            self._double_talk.feed(pending[:usable], far_dtd)
        out = cancelled if self.echo_heard else pending[:usable]  # AEC3 adapts either way
        if far_dtd is not None:
            self._leak.feed(out, far_dtd)
        self._account(pending[:usable], out, far, first - self._shift)
        if self.dump is not None:
            aligned = -1 if self._aligned is None else self._aligned
            self.dump.write(pending[:usable], far, far_dtd, out,
                            (at, first, usable, self._shift, aligned, self.settled, self.trusted, self.double_talk))
        if self._since_estimate >= self._track_every:
            self._since_estimate = 0
            if self._ahead_min != _NOT_SEEN:
                self._ahead_mins.append(self._ahead_min)
            self._ahead_min = _NOT_SEEN
            self._track(anchor + self._count)
        return out, at - len(self._carry) / self.rate

    def _place(self, offset: int, n: int) -> int:
        """Lay the capture on the reference's timeline by this callback (`offset`: where its sample 0 would be).

        Within one of the reference's stretches the timeline holds still. Why: the reference counts the sound
        card's samples from the stretch's start, and the capture counts the same card's samples, so one alignment
        holds for the whole stretch; what the callback times say beyond it is their own noise. Following the
        earliest callback (a callback only comes later than its sound) moved it a few samples at a time, each a
        misalignment AEC3 re-adapts to: ~8 samples every ~2.2 s with the card ~242 ppm off the monotonic clock
        (200 moves a session), and still ~105 a session, 1 to 81 samples at a time, once the reference followed the
        card's clock (duplex-20261206-clock; by my reading the monotonic times themselves wander: both callbacks
        read them in Python, late whenever they wait for the interpreter).
        The timeline is laid: by the earliest callback over the first RELAY_S; when the reference begins a new
        stretch (a restart placed by its DAC time), by the earliest of the last RELAY_S of callbacks; and when the
        callbacks all come more than LATE_S after it, or EARLY_S before it, for LATE_FOR_S (samples were lost, the
        capture path's latency really changed, or microphone and speaker are on two cards whose clocks drift
        apart), by the earliest of them. A late callback alone moves nothing: on a busy machine the audio thread
        is held up and the blocks then come in a burst, whole (measured on the synthetic room, stalls of 60 / 100
        / 200 ms every 2 s: 27-41 / 13-17 / 10-15 dB ERLE per answer against 61 when each late callback restarted
        the timeline, as it did). Returns the anchor."""
        offsets = self._offsets
        offsets.append((self._count, offset))
        while offsets[0][0] < self._count - RELAY_S * self.rate:
            offsets.popleft()
        stretches = self.reference.stretches
        if self._anchor is None or (offset < self._anchor and self._count < RELAY_S * self.rate):
            self._anchor, self._off_for = offset, 0
        elif stretches != self._stretches:
            self._anchor, self._off_for = min(o for _, o in offsets), 0
        elif -EARLY_S * self.rate <= offset - self._anchor <= LATE_S * self.rate:
            self._off_for = 0
        else:
            self._off_min = offset if self._off_for == 0 else min(self._off_min, offset)
            self._off_for += n
            if self._off_for >= LATE_FOR_S * self.rate:
                self._anchor, self._off_for = self._off_min, 0
        self._stretches = stretches
        return self._anchor

    def _remember(self, samples: Audio) -> None:
        n = min(len(samples), self._window)
        self._history = np.roll(self._history, -n)
        self._history[-n:] = samples[-n:]
        self._since_estimate += len(samples)

    def _account(self, before: Audio, after: Audio, far: Audio, far_index: int) -> None:
        """Count the frames (`far` starts at reference index `far_index`): far-end activity, the energies for the
        ERLE, and the far end played since a restart (`settled`)."""
        stats = self.stats
        for i in range(0, len(before), FRAME):
            stats.frames += 1
            if rms_dbfs(far[i : i + FRAME]) > FAR_ACTIVE_DBFS:
                stats.far_frames += 1
                self._adapted += 1
                if self._since_cut is not None and far_index + i >= self._cut_index:
                    self._since_cut += 1
                stats.in_energy += float(np.sum(np.square(before[i : i + FRAME], dtype=np.float64)))
                stats.out_energy += float(np.sum(np.square(after[i : i + FRAME], dtype=np.float64)))

    def _track(self, end_index: int) -> None:
        """Re-estimate the bulk delay over the latest window of capture (ending at reference index `end_index`)."""
        start = end_index - self._window
        window = self.reference.read_index(start - self._max_delay, self._window + self._max_delay + self._lookahead)
        if rms_dbfs(window) <= FAR_ACTIVE_DBFS:
            return
        # the reference whose echo lands inside the capture window whatever the delay (up to max_delay): only when
        # that part played can a quiet capture mean "no echo" rather than "not arrived yet"
        must_echo = window[self._max_delay:self._window]
        self.stats.estimates += 1
        estimate = estimate_delay(self._history, window, self._max_delay + self._lookahead)
        if estimate is not None and estimate.clear:
            self.stats.clear_estimates += 1
            self._unclear = 0
            if not self.trusted:
                log.info("echo cancellation: the echo delay is known again; the level gate is off")
            self.trusted = True
            self._use(estimate)
        elif rms_dbfs(self._history) <= HEARD_DBFS:
            if rms_dbfs(must_echo) > FAR_ACTIVE_DBFS:
                self._quiet_windows += 1
        else:
            self._unclear += 1
            if self._unclear >= self._unclear_limit and self.trusted:
                self.trusted = False
                log.warning("echo cancellation: the microphone hears the speaker but the echo delay cannot be "
                            "estimated; the level gate is used until it can")

    def _use(self, estimate: DelayEstimate) -> None:
        """Align the reference by a clear estimate: on the first, shift only when the delay is outside what AEC3
        tracks by itself; later, follow a confirmed change of the bulk delay (see the module docstring). After a
        restart of the output stream, an estimate over enough new audio that the alignment matches settles it.

        A follow may read the reference ahead of the capture's time as far as the player has surely written it
        (`_read_ahead_limit`); only a change beyond that restarts AEC3. Why: the bulk delay wandered by 6-14 ms with
        each stream restart in bench duplex (every hold and barge-in flushes the device), so follows of a shorter delay
        add up; with the old limit of one frame ahead, a 7 ms follow that needed 14.8 ms restarted AEC3 0.7 s before an
        answer ended, and the echo's tail, no longer cancelled, held the voice and barged in (a diagnostic
        bench duplex run, 2026-12-05). Stopping at a frame ahead and leaving AEC3 the rest instead was worse:
        the delay AEC3 sees then shrinks a little at each such follow and never grows back, and a run had 7 false
        barge-ins."""
        if self.delay is None:
            log.info("echo cancellation: the microphone hears the speaker, %.1f ms after its DAC time (clarity %.1f)",
                     (estimate.lag - self._lookahead) / self.rate * 1000, estimate.clarity)
        self.delay = estimate
        bulk = estimate.lag - self._lookahead
        self._follow(bulk, estimate.clarity)
        if self._since_cut is not None and self._since_cut * FRAME >= SETTLE_FAR_S * self.rate and \
                self._aligned is not None and abs(bulk - self._aligned) <= FOLLOW_MIN_S * self.rate:
            log.info("echo cancellation: delay %.1f ms confirmed %.2f s of far end after the output stream "
                     "restarted", bulk / self.rate * 1000, self._since_cut * FRAME / self.rate)
            self._since_cut = None

    def _follow(self, bulk: int, clarity: float) -> None:
        """Align for a clear estimate of the bulk delay (see ``_use``)."""
        candidate, self._candidate = self._candidate, bulk
        if self._aligned is None:
            self._align(bulk, self._initial_shift(bulk), clarity)
            return
        if abs(bulk - self._aligned) <= FOLLOW_MIN_S * self.rate or candidate is None or \
                abs(bulk - candidate) > AGREE_S * self.rate:
            return
        kept = self._shift + (bulk - self._aligned)  # AEC3 keeps seeing the echo where it has learnt it
        if kept >= -self._read_ahead_limit() and bulk - kept <= AEC3_RANGE_S * self.rate:
            log.info("echo delay %.1f ms (was %.1f): reference shifted by %.1f ms to follow it",
                     bulk / self.rate * 1000, self._aligned / self.rate * 1000, kept / self.rate * 1000)
            self._shift, self._aligned = kept, bulk
        else:
            self._align(bulk, self._initial_shift(bulk), clarity)

    def _read_ahead_limit(self) -> int:
        """How far ahead of the capture's time the reference may be read: what the player had written past the
        newest capture sample, at the least over the last READ_AHEAD_WINDOWS tracking windows, less a frame for
        jitter; a frame at least (the old fixed limit)."""
        if not self._ahead_mins:
            return FRAME
        return max(FRAME, min(self._ahead_mins) - FRAME)

    def _initial_shift(self, bulk: int) -> int:
        """The shift for a bulk delay AEC3 has not adapted to: none when AEC3 tracks it itself, else a small causal
        residual for a late echo, or a frame to spare for a reference that runs late (read ahead)."""
        if 0 <= bulk <= AEC3_RANGE_S * self.rate:
            return 0
        if bulk > 0:
            return bulk - round(RESIDUAL_DELAY_S * self.rate)
        return bulk - FRAME

    def _align(self, bulk: int, shift: int, clarity: float) -> None:
        """Set the shift for `bulk`; a new shift starts AEC3 afresh (it converges faster from scratch than from a
        filter adapted to another alignment)."""
        self._aligned = bulk
        self._double_talk.reset()  # its smoothed spectra were taken at another alignment
        self._leak.reset()
        if abs(shift - self._shift) > 0.002 * self.rate:
            log.info("echo delay %.1f ms (clarity %.1f): reference shifted by %.1f ms", bulk / self.rate * 1000,
                     clarity, shift / self.rate * 1000)
            self._shift = shift
            self._apm.reset()
            self._adapted = 0
