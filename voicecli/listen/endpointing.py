"""End of turn: when has the user started, paused, and finished speaking?

Why Silero VAD run by hand: the model already ships inside faster-whisper (no extra download, works offline), costs
~0.1 ms per 32 ms window on one CPU thread, and is far more robust to breaths and background noise than an energy gate.
faster-whisper's own wrapper resets the recurrent state on every call (it is built for whole files), so here the ONNX
session is run one 512-sample window at a time, carrying the LSTM state and the 64-sample context between windows.
That gives exactly the probabilities of the batched call, but live.

Why the state is dropped after a second without speech between turns (`vad_reset_ms`): carried for minutes, the
LSTM state drifts into one that scores real speech near zero, a known trait of Silero in endless streams (its issue
#725; Pipecat resets every 5 s). Measured on a recording of `voicecli bench duplex`: after an answer's echo-cancelled
residual, the user's "Wait, stop." over the next answer came out of the canceller at -15 to -25 dBFS and scored
0.00-0.07 (0 of ~20 windows at the 0.5 threshold), the same audio 0.6-0.8 from a fresh state. Between turns nothing
is lost by a reset (no speech is being tracked) and a fresh state is where Silero starts every file; inside a turn it
is never reset, so pauses and hesitations are judged as before. What the reset does not fix: a user talking over the
answer's echo for half their words or more is still rarely heard (bench duplex after it: 2 of 18 over three runs),
because AEC3's suppressor holds their voice down (voicecli.audio.echo_cancel).

Events carry the monotonic time of the block in which they were detected, so they can be placed on the same clock
as the rest of the turn's latency marks.

Besides the two events every consumer needs (SpeechStarted, SpeechEnded), the endpointer reports SpeechPaused a
short moment (tail_ms) into a silence, with the utterance so far: the transcriber can start decoding it, and the app
can start answering it speculatively, while the hang-over is still running; both reuse their work if the user does
not resume (SpeechResumed). The audio of SpeechPaused and of the SpeechEnded that follows it without a resume are the
same samples, which is what makes that reuse exact. With ``report_stops`` it also reports SpeechStopped at the first
window below the lower threshold, tail_ms sooner than the pause: the decode can start there, and the pause reuses it
when its `voiced` (the end of the last speech window) is the same, the audio then differing only in trailing silence.

The hang-over itself can be changed per pause with ``end_after``: once the speculative transcript says the sentence
is finished (voicecli.listen.turn_completion), the turn is confirmed sooner; an unfinished one waits longer.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from voicecli.audio.rates import SPEECH_RATE

"""The rate of everything the user says: what Silero VAD and Whisper consume, and what the microphone delivers."""
WINDOW = 512
"""Samples per VAD window: the only size Silero v5/v6 accepts at 16 kHz (32 ms)."""
_CONTEXT = 64
_WINDOW_MS = WINDOW * 1000 / SPEECH_RATE

VAD_RESET_MS = 1000
"""Audio without speech between turns after which Silero's state starts afresh (see the module docstring). Why 1 s:
on the bench duplex recording, resets after 0.5 / 1 / 2 s of non-speech kept 11 / 18 / 18 of the windows a fresh state
finds in the user's words over an answer (none without resets); the shorter, the likelier a reset lands just before
speech starts, where the state's first windows score lower."""

SURE_SPEECH = 0.8
"""The mean probability of a candidate's speech windows at which `sure_onset_ms` of it is reported as a SpeechOnset
(barge-in) without waiting for `onset_ms`. Why: the echo the canceller lets through is distorted speech, which Silero
scores lukewarm, while a voice the microphone hears clean scores high from its first windows. Replayed on what the
app's canceller handed on live in seven bench duplex runs (results/bench/sure-onset-20261206), every SpeechOnset at
160 ms from the answers' echo alone, past a session's first seconds and within the listener's level rule, had a mean
of 0.56-0.68 (7); the users' interruptions 0.55-0.94, 72 of 101 at 0.8 or more (those over the echo lower: the
canceller's suppressor distorts them too, and they wait for `onset_ms` as before)."""

Audio = NDArray[np.float32]


def silero_model_path() -> Path:
    """The Silero VAD ONNX file bundled with faster-whisper, found without importing faster-whisper (slow)."""
    spec = importlib.util.find_spec("faster_whisper")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("faster-whisper is not installed: it carries the Silero VAD model")
    for location in spec.submodule_search_locations:
        path = Path(location) / "assets" / "silero_vad_v6.onnx"
        if path.is_file():
            return path
    raise FileNotFoundError("silero_vad_v6.onnx not found inside the installed faster-whisper")


class SileroVad:
    """Streaming Silero VAD: feed consecutive 512-sample windows, get one speech probability per window."""

    def __init__(self, model_path: Path | None = None) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        # One thread: a window is ~0.1 ms of work, more threads only add wake-up cost and steal cores from Whisper.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        self._session: Any = onnxruntime.InferenceSession(
            str(model_path or silero_model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.reset()

    def reset(self) -> None:
        """Forget the stream so far (a new, unrelated audio stream follows)."""
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(_CONTEXT, dtype=np.float32)

    def __call__(self, window: Audio) -> float:
        if window.shape != (WINDOW,):
            raise ValueError(f"Silero VAD takes windows of exactly {WINDOW} samples at 16 kHz, got {window.shape}")
        model_input = np.concatenate([self._context, window.astype(np.float32, copy=False)])[np.newaxis, :]
        prob, self._h, self._c = self._session.run(None, {"input": model_input, "h": self._h, "c": self._c})
        self._context = model_input[0, -_CONTEXT:].copy()
        return float(np.asarray(prob).reshape(-1)[0])


# -- events ----------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeechStarted:
    """Speech confirmed (min_speech_ms of it): `at` is the monotonic time of the block where that happened."""

    at: float
    turn: int


@dataclass(frozen=True)
class SpeechOnset:
    """`onset_ms` of speech (less than min_speech_ms) before a turn may start, or `sure_onset_ms` of speech the
    detector is sure of: too little to start a turn on, early enough to stop the assistant for (barge-in). `turn`: the
    number the turn will have if SpeechStarted follows; a blip that stays below min_speech_ms is followed by nothing.
    `audio`: the speech so far (from its first window at or above the lower threshold), for its level."""

    at: float
    turn: int
    audio: Audio


@dataclass(frozen=True)
class SpeechHint:
    """`hint_ms` of speech between turns, less than a barge-in's: too little to stop the assistant for, enough to
    hold its voice while the listener finds out (barge-in confirmed at `onset_ms`, or SpeechFaded). `turn`: the
    number the turn will have if SpeechStarted follows. `audio`: as SpeechOnset.audio."""

    at: float
    turn: int
    audio: Audio


@dataclass(frozen=True)
class SpeechFaded:
    """The speech a SpeechHint reported fell silent before it became a turn: a blip (a cough, a burst of echo)."""

    at: float
    turn: int


@dataclass(frozen=True)
class SpeechStopped:
    """The first window below the lower threshold after speech (``report_stops``): the earliest moment `audio` is
    the utterance as a SpeechPaused and a SpeechEnded would hand it over if no speech follows, so decoding can
    start ~tail_ms sooner. Silero dips there mid-sentence too (a stop consonant, a breath): a speech window after it
    makes it stale, which `voiced` tells (see SpeechPaused.voiced)."""

    at: float
    turn: int
    audio: Audio
    voiced: int
    """Samples of `audio` up to the end of its last speech window."""


@dataclass(frozen=True)
class SpeechPaused:
    """tail_ms of silence inside a turn: a good moment to start decoding `audio` speculatively."""

    at: float
    turn: int
    audio: Audio
    voiced: int = 0
    """Samples of the utterance up to the end of its last speech window: equal in a SpeechStopped, SpeechPaused
    and SpeechEnded of one turn exactly when no speech window came between them (the index only grows)."""


@dataclass(frozen=True)
class SpeechResumed:
    """Speech came back after a SpeechPaused: any speculative work on that pause is stale."""

    at: float
    turn: int


@dataclass(frozen=True)
class SpeechEnded:
    """End of turn. `audio` is the utterance: pre-roll + speech + tail_ms of the silence after it.

    `last_speech_at` is the time of the block holding the last speech window, i.e. when the user stopped talking;
    `at` is when the endpointer became sure of it. `forced` marks a turn cut at max_utterance_ms.
    """

    at: float
    turn: int
    audio: Audio
    last_speech_at: float
    forced: bool = False
    voiced: int = 0
    """As SpeechPaused.voiced (0 from push-to-talk, which has no pauses)."""


TurnEvent = (SpeechHint | SpeechFaded | SpeechOnset | SpeechStarted | SpeechStopped | SpeechPaused | SpeechResumed
             | SpeechEnded)


class TurnDetector(Protocol):
    """What the app drives: feed every captured 16 kHz block, act on the events."""

    def feed(self, block: Audio, at: float | None = None) -> list[TurnEvent]: ...

    @property
    def speech_probability(self) -> float: ...


def _as_mono(block: Audio) -> Audio:
    samples = np.asarray(block, dtype=np.float32)
    return samples.reshape(-1) if samples.ndim == 1 or samples.shape[-1] == 1 else samples.mean(axis=-1)


def _windows(ms: float) -> int:
    return max(0, math.ceil(ms / _WINDOW_MS))


# -- voice-activity endpointer ---------------------------------------------------------------------------------------


class Endpointer:
    """Turns a live 16 kHz stream into turn events with Silero VAD and a silence hang-over.

    - A turn starts once `min_speech_ms` of windows reach `threshold` without a drop below the lower hysteresis
      threshold (threshold - 0.15, as Silero's own segmenter does); shorter blips (a cough, a click) are ignored.
    - The utterance keeps `pre_roll_ms` of audio from before the onset, so soft first consonants reach Whisper.
    - The turn ends after `silence_ms` without speech; the audio keeps only `tail_ms` of that silence.
    - `speculate`: also report SpeechPaused after `tail_ms` of silence (and SpeechResumed if speech returns).
    - `report_stops` (with `speculate`): also report SpeechStopped at the first silent window after speech, before
      the pause is sure: the transcriber starts there and the pause reuses that decode (voicecli.listen.transcription).
    - `onset_ms` (below `min_speech_ms`; 0: off): also report SpeechOnset once that much speech has come between
      turns, so a barge-in need not wait for a whole turn's start.
    - `sure_onset_ms` (below `onset_ms`; 0: off): report that SpeechOnset sooner, at the first speech window from
      this much speech on where the speech windows' mean probability is at least SURE_SPEECH (see there).
    - `hint_ms` (below `onset_ms`, or below `min_speech_ms` without an onset; 0: off): report SpeechHint sooner
      still, and SpeechFaded if that speech dies before it becomes a turn (the listener holds the answer's voice in
      between, voicecli.listen.listener).
    - `vad_reset_ms` (0: never): between turns, start Silero's state afresh after this much audio without speech
      (every window below the lower threshold; see the module docstring).
    """

    def __init__(
        self,
        silence_ms: int = 700,
        threshold: float = 0.5,
        min_speech_ms: int = 250,
        pre_roll_ms: int = 300,
        *,
        tail_ms: int = 250,
        speculate: bool = True,
        report_stops: bool = False,
        onset_ms: int = 0,
        sure_onset_ms: int = 0,
        hint_ms: int = 0,
        vad_reset_ms: int = VAD_RESET_MS,
        max_utterance_ms: int = 30_000,
        vad: SileroVad | None = None,
    ) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if tail_ms >= silence_ms:
            raise ValueError("tail_ms must be shorter than silence_ms")
        self.threshold = threshold
        self.neg_threshold = max(threshold - 0.15, 0.01)
        self._silence_windows = max(1, _windows(silence_ms))
        self._min_speech_windows = max(1, _windows(min_speech_ms))
        onset = _windows(onset_ms)
        self._onset_windows = onset if onset < self._min_speech_windows else 0  # 0: no SpeechOnset
        sure = _windows(sure_onset_ms)
        self._sure_windows = sure if sure < self._onset_windows else 0  # 0: only at onset_windows
        hint = _windows(hint_ms)
        self._hint_windows = hint if hint < (self._onset_windows or self._min_speech_windows) else 0  # 0: none
        self._tail_windows = _windows(tail_ms)
        self._reset_windows = _windows(vad_reset_ms)  # 0: never
        self._quiet_windows = 0  # consecutive windows without speech between turns (for vad_reset_ms)
        self._max_windows = max(self._silence_windows + 1, _windows(max_utterance_ms))
        self._speculate = speculate
        self._report_stops = speculate and report_stops
        self._vad = vad or SileroVad()
        self._pre_roll: deque[Audio] = deque(maxlen=max(0, _windows(pre_roll_ms)))
        self._pending = np.zeros(0, dtype=np.float32)
        self._turn = 0
        self._speech_probability = 0.0
        self._reset_turn_state()

    def _reset_turn_state(self) -> None:
        self._candidate: list[Audio] = []
        self._candidate_voiced = 0
        self._candidate_certainty = 0.0  # the sum of the candidate's speech windows' probabilities
        self._onset_told = False  # the candidate was reported by a SpeechOnset
        self._hinted = False  # the candidate was reported by a SpeechHint (its fading will be too)
        self._in_speech = False
        self._utterance: list[Audio] = []
        self._last_speech_index = -1  # index in _utterance of the last window at/above threshold
        self._last_speech_at = 0.0
        self._silent_run = 0  # windows since the last speech window (0 when speech is ongoing)
        self._paused = False
        self._pause_silence_windows: int | None = None  # end_after() for the current pause

    @property
    def speech_probability(self) -> float:
        """Highest speech probability in the latest block: read it for barge-in (is the user talking over us?)."""
        return self._speech_probability

    @property
    def in_speech(self) -> bool:
        """True between SpeechStarted and SpeechEnded."""
        return self._in_speech

    def paused_in(self, turn: int) -> bool:
        """True while turn `turn` is in a pause (after its SpeechPaused, before a resume or its end)."""
        return self._in_speech and self._paused and self._turn == turn

    @property
    def speaking(self) -> bool:
        """True inside a turn while its latest window is speech (no silence counting): the utterance is growing."""
        return self._in_speech and self._silent_run == 0

    @property
    def turn(self) -> int:
        """The number of the current turn (of the last one between turns)."""
        return self._turn

    @property
    def utterance_samples(self) -> int:
        """Samples of the current turn's utterance so far, pre-roll included (0 between turns)."""
        return len(self._utterance) * WINDOW

    def utterance(self) -> Audio:
        """The current turn's audio so far, pre-roll included (empty between turns): what a draft of the words so
        far decodes while the user is still speaking."""
        return np.concatenate(self._utterance) if self._utterance else np.zeros(0, dtype=np.float32)

    @property
    def last_speech_at(self) -> float:
        """Time of the block holding the current turn's last speech window."""
        return self._last_speech_at

    def end_after(self, silence_ms: int) -> None:
        """End the current pause's turn after `silence_ms` of silence instead of the default hang-over.

        Only meaningful while paused (after SpeechPaused); a resume restores the default. If that much silence has
        already passed, the turn ends with the next window fed.
        """
        if self._in_speech and self._paused:
            self._pause_silence_windows = max(self._tail_windows + 1, _windows(silence_ms))

    def reset(self) -> None:
        """Drop any turn in progress and the VAD state (e.g. after the microphone was reopened)."""
        self._vad.reset()
        self._quiet_windows = 0
        self._pre_roll.clear()
        self._pending = np.zeros(0, dtype=np.float32)
        self._speech_probability = 0.0
        self._reset_turn_state()

    def feed(self, block: Audio, at: float | None = None) -> list[TurnEvent]:
        """Process one captured block (any length, 16 kHz mono); `at` defaults to now (monotonic)."""
        stamp = time.monotonic() if at is None else at
        samples = np.concatenate([self._pending, _as_mono(block)])
        usable = len(samples) - len(samples) % WINDOW
        self._pending = samples[usable:].copy()
        events: list[TurnEvent] = []
        highest: float | None = None
        for start in range(0, usable, WINDOW):
            window = samples[start : start + WINDOW].copy()
            prob = self._vad(window)
            highest = prob if highest is None else max(highest, prob)
            self._step(window, prob, stamp, events)
        if highest is not None:
            self._speech_probability = highest
        return events

    def _step(self, window: Audio, prob: float, at: float, events: list[TurnEvent]) -> None:
        if not self._in_speech:
            self._step_idle(window, prob, at, events)
            return
        self._utterance.append(window)
        if prob >= self.threshold:
            if self._paused:
                events.append(SpeechResumed(at, self._turn))
            self._paused = False
            self._pause_silence_windows = None
            self._silent_run = 0
            self._last_speech_index = len(self._utterance) - 1
            self._last_speech_at = at
        elif prob < self.neg_threshold or self._silent_run > 0:
            # Between the two thresholds the previous state holds: speech stays speech, silence keeps counting.
            self._silent_run += 1
        else:
            self._last_speech_index = len(self._utterance) - 1
            self._last_speech_at = at
        silence_windows = self._silence_windows
        if self._paused and self._pause_silence_windows is not None:
            silence_windows = self._pause_silence_windows
        voiced = (self._last_speech_index + 1) * WINDOW
        if self._report_stops and not self._paused and self._silent_run == 1:
            events.append(SpeechStopped(at, self._turn, self._cut(), voiced))
        if self._silent_run >= silence_windows:
            events.append(SpeechEnded(at, self._turn, self._cut(), self._last_speech_at, voiced=voiced))
            self._finish_turn()
        elif self._speculate and not self._paused and self._silent_run >= max(1, self._tail_windows):
            self._paused = True
            events.append(SpeechPaused(at, self._turn, self._cut(), voiced))
        elif len(self._utterance) >= self._max_windows:
            events.append(SpeechEnded(at, self._turn, self._cut(), self._last_speech_at, forced=True, voiced=voiced))
            self._finish_turn()

    def _step_idle(self, window: Audio, prob: float, at: float, events: list[TurnEvent]) -> None:
        self._quiet_windows = self._quiet_windows + 1 if prob < self.neg_threshold and not self._candidate else 0
        if self._reset_windows and self._quiet_windows >= self._reset_windows:
            self._vad.reset()  # the state drifts over long streams (see the module docstring)
            self._quiet_windows = 0
        if not self._candidate and prob < self.threshold:
            self._pre_roll.append(window)
            return
        if self._candidate and prob < self.neg_threshold:
            # A blip, not speech: it becomes ordinary history for the pre-roll.
            self._pre_roll.extend(self._candidate)
            self._pre_roll.append(window)
            self._drop_candidate()
            if self._hinted:
                self._hinted = False
                events.append(SpeechFaded(at, self._turn + 1))
            return
        self._candidate.append(window)
        if prob >= self.threshold:
            self._candidate_voiced += 1
            self._candidate_certainty += prob
            voiced = self._candidate_voiced
            if voiced == self._hint_windows:
                self._hinted = True
                events.append(SpeechHint(at, self._turn + 1, np.concatenate(self._candidate)))
            sure = (self._sure_windows and voiced >= self._sure_windows
                    and self._candidate_certainty >= SURE_SPEECH * voiced)
            if not self._onset_told and (voiced == self._onset_windows or sure):
                self._onset_told = True
                events.append(SpeechOnset(at, self._turn + 1, np.concatenate(self._candidate)))
        if self._candidate_voiced >= self._min_speech_windows:
            self._hinted = False
            self._turn += 1
            self._in_speech = True
            self._utterance = [*self._pre_roll, *self._candidate]
            self._pre_roll.clear()
            self._drop_candidate()
            self._last_speech_index = len(self._utterance) - 1
            self._last_speech_at = at
            events.append(SpeechStarted(at, self._turn))

    def _drop_candidate(self) -> None:
        self._candidate, self._candidate_voiced, self._candidate_certainty, self._onset_told = [], 0, 0.0, False

    def _cut(self) -> Audio:
        end = min(len(self._utterance), self._last_speech_index + 1 + self._tail_windows)
        return np.concatenate(self._utterance[:end])

    def _finish_turn(self) -> None:
        # The trailing silence is the pre-roll of whatever comes next.
        tail = self._utterance[-self._pre_roll.maxlen :] if self._pre_roll.maxlen else []
        self._reset_turn_state()
        self._pre_roll.extend(tail)


# -- push-to-talk ----------------------------------------------------------------------------------------------------


class PushToTalk:
    """Turns bounded by a key instead of the VAD: same events, so the rest of the app does not care which is used.

    Audio fed while released is kept only as pre-roll (people start talking as they press); while pressed it is all
    kept. release() ends the turn at once: no hang-over to wait for.
    """

    def __init__(self, pre_roll_ms: int = 300, max_utterance_ms: int = 120_000) -> None:
        self._pre_roll_samples = int(pre_roll_ms * SPEECH_RATE / 1000)
        self._max_samples = int(max_utterance_ms * SPEECH_RATE / 1000)
        self._history: deque[Audio] = deque()
        self._history_samples = 0
        self._utterance: list[Audio] = []
        self._utterance_samples = 0
        self._pressed = False
        self._turn = 0
        self._last_block_at = 0.0

    @property
    def pressed(self) -> bool:
        return self._pressed

    @property
    def speech_probability(self) -> float:
        """1.0 while the key is held: pressing the key is the user's explicit claim to the floor."""
        return 1.0 if self._pressed else 0.0

    def press(self, at: float | None = None) -> SpeechStarted | None:
        """Key down: start a turn (None if already pressed)."""
        if self._pressed:
            return None
        self._pressed = True
        self._turn += 1
        self._utterance = list(self._history)
        self._utterance_samples = self._history_samples
        self._history.clear()
        self._history_samples = 0
        return SpeechStarted(time.monotonic() if at is None else at, self._turn)

    def release(self, at: float | None = None) -> SpeechEnded | None:
        """Key up: end the turn with everything fed since press() (None if it was not pressed)."""
        if not self._pressed:
            return None
        return self._end(time.monotonic() if at is None else at, forced=False)

    def feed(self, block: Audio, at: float | None = None) -> list[TurnEvent]:
        samples = _as_mono(block).copy()
        self._last_block_at = time.monotonic() if at is None else at
        if not self._pressed:
            self._history.append(samples)
            self._history_samples += len(samples)
            while self._history and self._history_samples - len(self._history[0]) >= self._pre_roll_samples:
                self._history_samples -= len(self._history.popleft())
            return []
        self._utterance.append(samples)
        self._utterance_samples += len(samples)
        if self._utterance_samples >= self._max_samples:
            return [self._end(self._last_block_at, forced=True)]
        return []

    def _end(self, at: float, forced: bool) -> SpeechEnded:
        audio = np.concatenate(self._utterance) if self._utterance else np.zeros(0, dtype=np.float32)
        self._pressed = False
        self._utterance, self._utterance_samples = [], 0
        return SpeechEnded(at, self._turn, audio, last_speech_at=at, forced=forced)
