"""The input half of the data flow: microphone -> endpointing -> transcription -> a spoken turn.

It also decides when the user talks over the assistant (barge-in). The microphone reaches the endpointer through the
echo defence audio.echo chooses (voicecli.listen.echo_path): by default the echo canceller cleans each block first;
the level gate (`EchoGate`) lets a block through while the assistant speaks only when it is clearly louder than what
is being played (`echo_margin_db` above the playback level), and with the canceller it steps in only while the
canceller cannot vouch for its output, and mutes what it hands on, whatever its level, while that is echo it let
through (audio.echo_leak_gate: coherent with what was played). Speech that reaches the endpointer while the assistant
speaks is a barge-in: the app stops playback at once and answers the new turn, at audio.barge_in_ms of speech, or at
audio.barge_in_sure_ms when the voice detector is sure of it (a voice heard clean; the echo the canceller lets
through scores lower, voicecli.listen.endpointing.SURE_SPEECH). Sooner still (audio.barge_in_hold_ms of speech), the
listener asks the app to hold the assistant's voice (HoldVoice: paused, nothing dropped): the user hears it yield as
they start, and the answer's echo stops, so the canceller has the user's voice alone to pass (over a playing answer
its suppressor holds a voice down). Speech that fades before barge_in_ms and stays away for HOLD_RELEASE_AFTER_S (a
cough, a burst of echo the canceller let through) releases it (ReleaseVoice): a false start costs a pause, not the
answer. Speech far quieter than the user's own voice (HOLD_BELOW_VOICE_DB under the level of their latest turns)
holds nothing and barges in only with a turn's start, not at audio.barge_in_ms: that is echo left over after
cancelling, which the voice detector cannot tell from a voice by its shape.

Speculation: at a short pause (SpeechPaused) the utterance so far is transcribed at once. That draft does two
things. It chooses the hang-over for this pause (voicecli.listen.turn_completion: a finished question is confirmed
sooner, an unfinished one waits longer), and it is offered to the app as a SpokenDraft, which the app may start
answering while playback is held. Speech that resumes withdraws the draft (DraftWithdrawn); the confirmed turn
(SpokenTurn) carries the same `turn` number, and the same text when nothing was said since the pause, so the app can
tell whether its speculative answer is the right one.

The draft starts at the earliest credible moment: the first silent VAD window after speech (SpeechStopped), whose
decode the pause then reuses when no speech came between them (voicecli.listen.transcription.TurnTranscriber).
With `partial_ms`, the growing utterance is also decoded while the user speaks, one decode at a time and only when
the worker is idle, and each result is offered as a PartialTranscript: the words so far, for display only (nothing
is answered from it; consumers that do not know it ignore it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicecli.audio.levels import rms_dbfs, speech_level_dbfs
from voicecli.audio.rates import SPEECH_RATE
from voicecli.config import AudioSettings, Config, TurnSettings
from voicecli.listen.echo_path import open_echo_path
from voicecli.listen.end_of_turn import end_after_ms
from voicecli.listen.endpointing import (
    Audio,
    Endpointer,
    PushToTalk,
    SileroVad,
    SpeechEnded,
    SpeechFaded,
    SpeechHint,
    SpeechOnset,
    SpeechPaused,
    SpeechResumed,
    SpeechStarted,
    SpeechStopped,
    TurnEvent,
)
from voicecli.listen.microphone import AudioBlock, Microphone, NoMicrophoneError
from voicecli.listen.smart_turn import SmartTurn, SmartTurnModelMissing
from voicecli.listen.transcription import Transcript, TurnTranscriber, WhisperModelMissing
from voicecli.listen.turn_completion import Completion, TurnEndPolicy, classify
from voicecli.listen.turn_likelihood import TurnLikelihood, TurnModelMissing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpokenTurn:
    """What the user said, with the turn's input-side latency marks (speech_start, speech_end, transcript_ready,
    turn_confirmed). `turn` is the endpointer's turn number, shared with the SpokenDraft of the same utterance."""

    text: str
    marks: dict[str, float]
    audio_s: float
    turn: int = 0


@dataclass(frozen=True)
class SpokenDraft:
    """The utterance so far, transcribed at a pause before the turn is confirmed: answer it, but hold the audio."""

    text: str
    marks: dict[str, float]
    turn: int


@dataclass(frozen=True)
class HangOver:
    """The silence after which turn `turn` ends at this pause, chosen from its draft's words (and voice): shown or
    logged by front ends that explain a wait; the turn itself comes as a SpokenTurn."""

    turn: int
    hold_ms: int


@dataclass(frozen=True)
class PartialTranscript:
    """The words so far of turn `turn`, decoded while the user speaks or at a dip in the speech: show them, never
    answer them (a SpokenDraft or SpokenTurn of the same turn supersedes them). `at`: when the decode finished."""

    text: str
    turn: int
    at: float


@dataclass(frozen=True)
class DraftWithdrawn:
    """The user spoke again after a SpokenDraft: any answer to it must be dropped unheard."""

    turn: int


@dataclass(frozen=True)
class BargeIn:
    """Speech passed the echo gate while the assistant was speaking."""

    at: float


@dataclass(frozen=True)
class HoldVoice:
    """Speech may be starting over the assistant (audio.barge_in_hold_ms of it): pause its voice, drop nothing; a
    BargeIn or a ReleaseVoice follows."""

    at: float


@dataclass(frozen=True)
class ReleaseVoice:
    """The speech that held the assistant's voice faded before it was a barge-in and stayed away for
    HOLD_RELEASE_AFTER_S (or held on, undecided, for HOLD_MAX_S): play on where it paused."""

    at: float


@dataclass(frozen=True)
class InputLevel:
    """The microphone's level in dBFS, at most ten times a second (for the level meter)."""

    db: float
    gated: bool


@dataclass(frozen=True)
class HeardNothing:
    """A turn was detected but transcribed to nothing (a cough, a door): no answer is given."""

    audio_s: float


ListenEvent = (SpokenTurn | SpokenDraft | HangOver | PartialTranscript | DraftWithdrawn | BargeIn | HoldVoice
               | ReleaseVoice | InputLevel | HeardNothing)

HOLD_MAX_S = 1.0
"""The longest the assistant's voice stays held on speech that neither fades nor becomes a barge-in (windows that
stay between Silero's two thresholds keep a candidate alive) since its latest SpeechHint: then it plays on."""
HOLD_RELEASE_AFTER_S = 0.55
"""How long speech that held the voice must stay faded before the answer plays on; speech that comes back sooner
keeps it held. Why: an interruption has pauses between its words, and one over the answer's echo is held down by the
canceller's suppressor until the hold silences the echo. Released at the first silent window, every "Wait, stop."
missed over the echo in bench duplex (duplex-20261205-hold: 5 of 5) was held on "Wait", released in the comma's
pause, and "stop." went under the echo again, unheard. The pause in that recording, clean: 10 VAD windows (320 ms)
below Silero's lower threshold; from the fading to the next word's hold (3 windows into it) 443-481 ms over the
echo (duplex-20261205-holdgrace, at 0.4 s: released, then held again 43-81 ms later). The price: a false hold (echo
let through) pauses the answer this much longer."""
HOLD_BELOW_VOICE_DB = 12.0
"""Speech over the answer this much quieter than the user's own voice (the level of their recent turns) holds
nothing: it is the answer's echo the canceller let through, at the level left after cancelling, where the user's
voice comes through at its own. Why 12 dB: replaying the canceller and the voice detector on the recordings kept by
duplex-20261205-settle, -settle-b and -words (scripts/false_holds.py), the echo alone made 34 holds in the 54
answers nobody interrupted, 14 of them 14-45 dB below the user's voice and the others within 12 dB (echo the
canceller did not remove: its level cannot tell it from a voice); of the 185 other holds, the user's questions and
interruptions with the interrupted answers' own echo, 12 were more than 12 dB below it (which of the two they were
the recordings do not say; the live bench's detections do). A turn's voice level is `speech_level_dbfs`; the
median of the latest VOICE_TURNS turns is kept; until the user has spoken a turn (typed questions only) every hold
is taken. The speech over the answer is measured the same way, over the speech so far (the audio a SpeechHint or
SpeechOnset carries). Why not its latest 96 ms: at a barge-in that is often the fading end of a word; in
duplex-20261206-fedpath it refused three interruptions, 12.6-16.8 dB below the voice by their latest 96 ms, and
replayed on seven runs the interruptions' speech so far was never more than 9.5 dB below the voice (101 of them)
where their latest 96 ms reached 28.9 dB (results/bench/sure-onset-20261206)."""
VOICE_TURNS = 5
"""The user's latest turns whose voice level HOLD_BELOW_VOICE_DB compares with (the median: one odd turn, a cough
or an echo the app took for a turn, does not move it)."""
HOLDS_RELEASED_MAX = 3
"""Holds that faded while one answer plays before the listener stops holding for it (until the assistant is quiet
again; barge-in works as without holds). Why: where the answer's own echo reaches the detector (audio.echo = "off"
on speakers), each hold silences the echo, the 'speech' fades, the answer plays on and is held again: a stutter
without end instead of one bounded to a few pauses."""


@dataclass
class EchoGate:
    """Lets microphone audio through while the assistant speaks only when it is clearly louder than the playback."""

    enabled: bool = True
    margin_db: float = 6.0
    is_speaking: Callable[[], bool] = field(default=lambda: False)
    playback_db: Callable[[], float] = field(default=lambda: -120.0)
    double_talk: Callable[[], bool] = field(default=lambda: False)
    """Whether the echo canceller hears a voice under the answer's echo (voicecli.listen.echo_path.EchoPath)."""
    leaking: Callable[[], bool] = field(default=lambda: False)
    """Whether the canceller's output is echo it let through (voicecli.listen.echo_path.EchoPath.leaking): muted
    whatever its level, which cannot tell echo passed whole from a voice (audio.echo_leak_gate)."""

    def passes(self, level_db: float) -> bool:
        if not self.enabled or not self.is_speaking():
            return True
        if self.leaking():
            return False
        return level_db > self.playback_db() + self.margin_db


class Listener:
    """Runs until cancelled, turning microphone blocks into ListenEvents for `on_event`."""

    def __init__(
        self,
        microphone: Microphone,
        detector: Endpointer | PushToTalk,
        transcriber: TurnTranscriber,
        on_event: Callable[[ListenEvent], None],
        gate: EchoGate | None = None,
        policy: TurnEndPolicy | None = None,
        prosody: SmartTurn | None = None,
        fused: TurnSettings | None = None,
        partial_ms: int = 0,
        words: TurnLikelihood | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        """`prosody` (with `fused`, its thresholds): also ask Smart Turn at each pause whether the voice sounds
        finished, and choose the hang-over from the text and the voice together (voicecli.listen.end_of_turn)
        instead of from the text alone. `partial_ms` (0: off): decode the growing utterance after every this much
        of it, when the Whisper worker is idle, and report PartialTranscripts. `words` (turn.words = "smollm2"):
        the language model that judges whether the draft's words are finished, instead of the word rules.
        `notes`: what the user should know about how this listener listens (a configured judge it had to do
        without), for the front end to show once."""
        self.microphone = microphone
        self.detector = detector
        self.transcriber = transcriber
        self._on_event = on_event
        self.gate = gate or EchoGate()
        self.policy = policy or TurnEndPolicy()
        self.prosody = prosody
        self.fused = fused or TurnSettings()
        self.words = words
        self.notes = notes
        self._speech_start: float | None = None
        self._draft_turn: int | None = None  # turn of the last SpokenDraft not yet withdrawn or confirmed
        self._last_level = 0.0
        self._pending: set[asyncio.Task[None]] = set()
        self._partial_samples = round(partial_ms * SPEECH_RATE / 1000)
        self._partial_turn = 0  # the turn the next partial belongs to, and its utterance length at the last one
        self._partial_from = 0
        self._shown_from = 0.0  # start time of the decode behind the latest PartialTranscript (none older is shown)
        self._ended_turn = 0  # the last turn that ended: its words so far are moot
        self._onset_barged = False  # this speech's SpeechOnset was a barge-in already: its start is not another
        self._held_at: float | None = None  # when a HoldVoice went out that no BargeIn or ReleaseVoice answered yet
        self._released = 0  # holds released while the assistant has been speaking (HOLDS_RELEASED_MAX)
        self._double_talk_held = False  # the hold in progress came from double talk (EchoGate.double_talk)
        self._double_talk_spent = False  # one such hold was released in this answer: no more of them in it
        self._barged = False  # a BargeIn stopped this answer: nothing in it is left to hold
        self._faded_at: float | None = None  # when the speech that holds the voice faded (HOLD_RELEASE_AFTER_S)
        self._voice_levels: deque[float] = deque(maxlen=VOICE_TURNS)  # the user's latest turns' voice levels (dBFS)

    async def run(self) -> None:
        self.microphone.start()
        try:
            async for block in self.microphone.blocks():
                self._block(block)
        finally:
            self.microphone.stop()
            for task in self._pending:
                task.cancel()

    def use_detector(self, detector: Endpointer | PushToTalk) -> None:
        """Switch between voice activity detection and push-to-talk (the F2 key)."""
        self.detector = detector
        self._speech_start = None
        self._partial_turn = self._ended_turn = 0  # a new detector counts its turns from 1 again

    def press(self) -> None:
        """Push-to-talk pressed (only meaningful with a PushToTalk detector)."""
        if isinstance(self.detector, PushToTalk):
            started = self.detector.press()
            if started is not None:
                self._event(started)

    def release(self) -> None:
        if isinstance(self.detector, PushToTalk):
            ended = self.detector.release()
            if ended is not None:
                self._event(ended)

    def _block(self, block: AudioBlock) -> None:
        level = rms_dbfs(block.samples)
        passes = self.gate.passes(level)
        if block.at - self._last_level >= 0.1:
            self._last_level = block.at
            self._on_event(InputLevel(level, not passes))
        samples = block.samples
        if not passes and not isinstance(self.detector, PushToTalk):
            samples = np.zeros_like(samples)  # gated: the detector hears silence, so a turn in progress still ends
        for event in self.detector.feed(samples, block.at):
            self._event(event)
        if self._held_at is None and self.gate.is_speaking() and self._released < HOLDS_RELEASED_MAX and \
                not self._barged and not self._double_talk_spent and self.gate.double_talk():
            self._held_at = block.at  # a voice under the echo: held, the rest of it comes through once the echo stops
            self._double_talk_held = True
            log.info("more than the answer's echo at the microphone (double talk told): its voice held")
            self._on_event(HoldVoice(block.at))
        if self._held_at is not None and (block.at - self._held_at >= HOLD_MAX_S or (
                self._faded_at is not None and block.at - self._faded_at >= HOLD_RELEASE_AFTER_S)):
            self._release(block.at)
        if self._held_at is None and not self.gate.is_speaking():
            self._released, self._double_talk_spent, self._barged = 0, False, False
        self._partial()

    def _partial(self) -> None:
        """Decode the utterance so far when `partial_ms` more of it came since the last one and the worker is idle
        (checked again with every block while it is busy)."""
        detector = self.detector
        if self._partial_samples <= 0 or not isinstance(detector, Endpointer) or not detector.speaking:
            return
        if detector.turn != self._partial_turn:
            self._partial_turn, self._partial_from = detector.turn, 0
        if detector.utterance_samples - self._partial_from < self._partial_samples:
            return
        future = self.transcriber.partial(detector.utterance())
        if future is not None:
            self._partial_from = detector.utterance_samples
            self._spawn(self._words_so_far(future, detector.turn))

    def _event(self, event: TurnEvent) -> None:
        if isinstance(event, SpeechHint):  # audio.barge_in_hold_ms of speech: hold the voice, decide later
            if self._held_at is not None:  # speech back before the hold ran out: still held, from now
                self._held_at, self._faded_at = event.at, None
            elif self.gate.is_speaking() and self._released < HOLDS_RELEASED_MAX and not self._barged and \
                    self._as_loud_as_the_user(event.audio, "not held"):
                self._held_at = event.at
                self._on_event(HoldVoice(event.at))
            return
        if isinstance(event, SpeechFaded):
            if self._held_at is not None:
                self._faded_at = event.at
            return
        if isinstance(event, SpeechOnset):  # audio.barge_in_ms of speech: enough to stop the assistant for
            # as loud as the user's voice: this soon; quieter (echo the canceller let through, most likely): only
            # with the turn's start, as with no onset at all (replayed: scripts/false_holds.py)
            speaking = self.gate.is_speaking()
            self._onset_barged = speaking and self._as_loud_as_the_user(event.audio,
                                                                        "no barge-in before the turn's start")
            if self._onset_barged:
                self._barge_in(event.at)
            elif not speaking:
                self._release(event.at)
            return
        if isinstance(event, SpeechStarted):
            self._speech_start = event.at
            if self.gate.is_speaking() and not self._onset_barged:
                self._barge_in(event.at)
            self._release(event.at)  # only if held: the answer it held ended meanwhile, nothing is left to stop
            self._onset_barged = False
        if isinstance(event, SpeechResumed | SpeechStarted) and self._draft_turn is not None:
            self._on_event(DraftWithdrawn(self._draft_turn))
            self._draft_turn = None
        if isinstance(event, SpeechEnded):
            self._ended_turn = event.turn
            self._voice_levels.append(speech_level_dbfs(event.audio))
        future = self.transcriber.observe(event)
        if future is None:
            return
        if isinstance(event, SpeechStopped):
            self._spawn(self._words_so_far(future, event.turn))
        elif isinstance(event, SpeechPaused):
            voice = None if self.prosody is None else asyncio.ensure_future(
                asyncio.to_thread(self.prosody.probability, event.audio))
            self._spawn(self._draft(future, event, voice))
        elif isinstance(event, SpeechEnded):
            marks = {"speech_start": self._speech_start or event.last_speech_at, "speech_end": event.last_speech_at,
                     "turn_confirmed": event.at}
            self._spawn(self._finish(future, marks, len(event.audio) / SPEECH_RATE, event.turn))

    def _as_loud_as_the_user(self, speech: Audio, otherwise: str) -> bool:
        """Whether `speech` (the speech so far) is loud enough to be the user's (HOLD_BELOW_VOICE_DB); True until the
        user's voice level is known. `otherwise` is logged with the levels when it is not."""
        if not self._voice_levels:
            return True
        voice = float(np.median(self._voice_levels))
        heard = speech_level_dbfs(speech)
        if heard >= voice - HOLD_BELOW_VOICE_DB:
            return True
        log.info("speech %.1f dB below the user's voice (%.1f dBFS) over the answer: echo, %s", voice - heard, voice,
                 otherwise)
        return False

    def _barge_in(self, at: float) -> None:
        self._held_at = self._faded_at = None  # the barge-in answers the hold: the app stops what it held
        self._double_talk_held = False
        # the app stops the answer asynchronously, so the assistant still counts as speaking for a few blocks: a hold
        # then (the double talk still told in the same block, in duplex-20261207-dtd-default 6 of its 14) would
        # pause, flush and release a speaker that is already stopped
        self._barged = True
        self._on_event(BargeIn(at))

    def _release(self, at: float) -> None:
        if self._held_at is not None:
            self._held_at = self._faded_at = None
            self._released += 1
            # told and nobody came: double talk holds nothing more in this answer. Why: live, the echo alone was
            # told again and again in one answer (three ~1 s pauses in duplex-20261206-dtdlags) where the replay of
            # its recordings told nothing; a user's interruption is told at its first words
            self._double_talk_spent = self._double_talk_spent or self._double_talk_held
            self._double_talk_held = False
            self._on_event(ReleaseVoice(at))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _words_so_far(self, future: asyncio.Future[Transcript], turn: int) -> None:
        """A decode of the growing utterance (a partial, or a stop's): its words, unless the turn has ended or a
        later decode's words were shown already."""
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await future
            text = transcript.text.strip()
            if not text or turn <= self._ended_turn or transcript.started_at <= self._shown_from:
                return
            self._shown_from = transcript.started_at
            self._on_event(PartialTranscript(text, turn, transcript.finished_at))

    async def _draft(self, future: asyncio.Future[Transcript], paused: SpeechPaused,
                     voice: asyncio.Future[float] | None = None) -> None:
        """The speculative transcript of a pause: offer the draft to the app at once, then pick this pause's
        hang-over from the words (and, with prosody, Smart Turn's verdict on the same audio, computed alongside the
        transcript). Why in that order: the draft's answer starts while the words are judged (SmolLM2 takes ~70 ms;
        judged first, every answer started that much later: `bench turns`, llm_first_token p50 +58-122 ms), and the
        hang-over is at least hundreds of ms, so it is chosen long before it runs out."""
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await future
            detector = self.detector
            if not isinstance(detector, Endpointer) or not detector.paused_in(paused.turn):
                return  # the user already resumed, or the turn already ended on the default hang-over
            text = transcript.text.strip()
            if text:
                marks = {"speech_start": self._speech_start or paused.at, "speech_end": detector.last_speech_at,
                         "transcript_ready": transcript.finished_at}
                self._draft_turn = paused.turn
                self._on_event(SpokenDraft(text, marks, paused.turn))
            completion = await self._judge(text) if text else None
            probability = None if voice is None else await voice
            if not detector.paused_in(paused.turn):
                return  # the user resumed meanwhile (which withdrew the draft)
            if voice is None:
                hold_ms = self.policy.hang_over(completion)
            else:
                hold_ms = end_after_ms(completion, probability, self.fused)
            detector.end_after(hold_ms)
            self._on_event(HangOver(paused.turn, hold_ms))

    async def _judge(self, text: str) -> Completion:
        """Are the words finished? The word rules (at once), or the language model (off the event loop, ~70 ms)."""
        if self.words is None:
            return classify(text)
        return await asyncio.to_thread(self.words.completion, text)

    async def _finish(self, future: asyncio.Future[Transcript], marks: dict[str, float], audio_s: float,
                      turn: int) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            transcript = await future
            marks["transcript_ready"] = transcript.finished_at
            self._draft_turn = None
            if transcript.text.strip():
                self._on_event(SpokenTurn(transcript.text.strip(), marks, audio_s, turn))
            else:
                self._on_event(HeardNothing(audio_s))


def make_detector(input_mode: str, audio: AudioSettings, vad: SileroVad | None = None) -> Endpointer | PushToTalk:
    """The app's detector (`input_mode`: audio.input_mode, or the one the F2 key chose): with voice activity
    detection, drafts start at the first silent window (report_stops), audio.barge_in_ms of speech, shorter
    than a turn's start (audio.barge_in_sure_ms when the detector is sure of it), is reported as a SpeechOnset for
    barge-in, and audio.barge_in_hold_ms, shorter still, as a SpeechHint that holds the assistant's voice. `vad`:
    the Silero session to run (a replay that records its probabilities); a new one by default."""
    if input_mode == "push_to_talk":
        return PushToTalk()
    silence_ms = audio.vad_silence_ms
    return Endpointer(silence_ms=silence_ms, tail_ms=min(audio.speculate_ms, silence_ms - 1), report_stops=True,
                      onset_ms=audio.barge_in_ms, sure_onset_ms=audio.barge_in_sure_ms, hint_ms=audio.barge_in_hold_ms,
                      vad=vad)


def turn_end_policy(config: Config) -> TurnEndPolicy:
    return TurnEndPolicy(
        default_ms=config.audio.vad_silence_ms,
        complete_ms=config.audio.turn_end_complete_ms,
        incomplete_ms=config.audio.turn_end_incomplete_ms,
        transcript_aware=config.audio.transcript_aware_turn_end,
    )


def open_listener(
    config: Config, on_event: Callable[[ListenEvent], None], gate: EchoGate | None = None
) -> Listener:
    """Microphone, detector and a warmed-up Whisper model from config. Raises NoMicrophoneError (typing still works)
    or WhisperModelMissing (names the install command). Blocking (~1-2 s): call it via asyncio.to_thread."""
    from voicecli.listen.transcription import transcriber_from_config

    wanted = config.audio.input_device
    microphone = Microphone(int(wanted) if wanted.isdigit() else (wanted or None), block_ms=config.audio.input_block_ms)
    transcriber = transcriber_from_config(config)
    transcriber.warm_up()
    detector = make_detector(config.audio.input_mode, config.audio)
    prosody = SmartTurn(config.models_dir) if config.audio.prosody_turn_end else None
    words, notes = turn_words(config)
    return Listener(microphone, detector, TurnTranscriber(transcriber), on_event, gate, turn_end_policy(config),
                    prosody, config.turn, config.audio.partial_ms, words, notes)


def turn_words(config: Config) -> tuple[TurnLikelihood | None, tuple[str, ...]]:
    """The language model that judges the draft's words (turn.words = "smollm2"; None: the word rules), and what
    the user should be told. Without the model (a Bedrock user who never installed the offline LLM, say) voice input
    still works: the word rules judge instead, and the note says so and how to get the model. Blocking (~0.3 s)."""
    if config.turn.words != "smollm2":
        return None, ()
    try:
        return TurnLikelihood.from_config(config), ()
    except TurnModelMissing as exc:
        return None, (f"the end of each turn is judged by the word rules, which answer more people mid-sentence: "
                      f"{exc}",)


@dataclass(frozen=True)
class VoiceOff:
    """Why a front end runs without voice input; typing still works. Worded once for every screen."""

    reason: str
    error: bool
    """A problem the user should fix (a missing model), not merely a machine without a microphone."""


async def open_gated_listener(
    config: Config, on_event: Callable[[ListenEvent], None], is_speaking: Callable[[], bool], sink: object
) -> Listener | VoiceOff:
    """The microphone as every front end (the chat app, the demo, headless chat) starts it: behind the echo defence
    audio.echo chooses (voicecli.listen.echo_path): the echo canceller fed with what `sink` plays, or the level gate,
    which compares the microphone with what `sink` is playing while the assistant `is_speaking`. Opened off the
    event loop (~1-2 s). The microphone itself opens only when the listener runs, so a front end that went away
    meanwhile simply never runs it. Without a microphone or a Whisper model: why voice input is off."""
    playback_db: Callable[[], float] = getattr(sink, "level_db", lambda: -120.0)

    def gated() -> Listener:
        echo = open_echo_path(config, sink)  # audio.echo; with "aec" the gate only stands in while AEC cannot
        playback = playback_db if echo.canceller is None else (
            lambda: -120.0 if echo.gate_open() else playback_db())
        double_talk = echo.double_talk if config.audio.echo_double_talk else (lambda: False)
        leaking = echo.leaking if config.audio.echo_leak_gate else (lambda: False)
        gate = EchoGate(echo.mode != "off", config.audio.echo_margin_db, is_speaking, playback, double_talk, leaking)
        listener = open_listener(config, on_event, gate)
        listener.microphone.process = echo.clean if echo.canceller is not None else None
        return listener

    try:
        return await asyncio.to_thread(gated)
    except NoMicrophoneError as exc:
        return VoiceOff(f"no microphone ({exc}): voice input is off, typing still works", error=False)
    except (WhisperModelMissing, SmartTurnModelMissing) as exc:
        return VoiceOff(f"voice input is off: {exc}", error=True)
    except OSError as exc:  # a device that vanished or refused while opening
        return VoiceOff(f"voice input is off: the microphone could not be opened ({exc})", error=True)
