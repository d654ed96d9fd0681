r"""The conversation pipeline: a user turn in, a spoken answer out, sentence by sentence.

    user text -> LLM stream -> sentence segmentation -> TTS transport -> MP3 decode -> speaker
                 \______________ one TurnTimeline of latency marks alongside ______________/

In bidi mode every sentence goes to TTS the moment the segmenter completes it, over the session's persistent
transport, while the LLM keeps generating: speech starts after the first sentence, not after the whole answer.
In batch mode the whole answer is collected first and sent as one request: the slow baseline, kept so the
difference can be felt and measured. Interruptions (barge-in) overtake everything: they stop playback at once,
cancel the LLM stream and every pending synthesis on the same connection, and keep in history only what was heard:
the sentences played and, of the one cut, the words played (the endpoint's word times against the sink's play
position, else the played fraction of its audio: voicecli.converse.heard). TurnFinished carries that text and where
the cut fell, for the UI and `voicecli bench duplex`.

A turn may start speculatively (voicecli.converse.speculation): the answer to a pause's draft transcript is
generated, synthesized and decoded, but its audio and its UI events are held back (by the Speculation, which owns
them) and its question is not yet in the history. Confirmed (the end of turn), everything held flows at once and the
turn goes on as any other; withdrawn (the user spoke again, or the final transcript differs), it is cancelled like a
barge-in, on the same connection, and leaves no trace: nothing heard, nothing shown, nothing in the history.

Nothing here polls. The TTS events are read by the shared `voicecli.tts.consumer.AudioConsumer`, which wakes on an
event or when the turn's set of sentences changes; the sink wakes the turn (`AudioSink.watch`, from its audio
thread through `loop.call_soon_threadsafe`) when an answer's first sample is heard and when everything written has
played; the UI receives every change as a typed event through `on_event` (each `Mark` carries its turn's timeline).
The one timer is the caption's: it wakes at the next word's predicted start to tell the UI the word being played.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from voicecli.audio.mp3_decode import Mp3DecodeError
from voicecli.audio.pcm import Samples
from voicecli.audio.streams import answer_decoder
from voicecli.audio_devices import AudioDeviceError
from voicecli.converse.heard import HeardCut, SentencePlay, current_word, cut_at, locate
from voicecli.converse.segmentation import Segmenter
from voicecli.converse.speakable import speakable_text
from voicecli.converse.speculation import Speculation
from voicecli.converse.timeline import Mark, SentenceMarks, SpeculationCounts, TurnTimeline
from voicecli.llm.base import LLM, ChatMessage, LLMError, StreamEnd, TextDelta
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import AudioSink, Holdable, PlayPosition
from voicecli.tts.base import AudioFailed, SpeechRequest, TransportError, TTSTransport
from voicecli.tts.consumer import AudioConsumer, RequestAudio, Stalled
from voicecli.wire.protocol import SAMPLE_RATE, WordTiming

log = logging.getLogger(__name__)

# --- typed events for the UI (like Pipecat frames: data flows one way, interruptions overtake it) --------------


@dataclass(frozen=True)
class TurnStarted:
    turn_id: int
    user_text: str
    origin: str
    mode: str


@dataclass(frozen=True)
class AssistantDelta:
    turn_id: int
    text: str


@dataclass(frozen=True)
class SentenceQueued:
    turn_id: int
    index: int
    text: str


@dataclass(frozen=True)
class SentenceAudio:
    """The first audio of a sentence arrived: the UI highlights it as the one being spoken."""

    turn_id: int
    index: int


@dataclass(frozen=True)
class SentenceWords:
    """Word times of a sentence arrived (more may follow for a long one): the UI captions it with them. `words` are
    all its words timed so far, in ms from the start of the sentence's audio."""

    turn_id: int
    index: int
    words: tuple[WordTiming, ...]


@dataclass(frozen=True)
class WordSpoken:
    """The word being played now (the caption's highlight): word `word` of sentence `index`, as the endpoint's word
    times count them. Sent when it changes, at most CAPTION_HZ times a second."""

    turn_id: int
    index: int
    word: int


@dataclass(frozen=True)
class TurnFinished:
    """A turn ended. `spoken` is what the listener heard (the whole answer unless interrupted); after an
    interruption `cut` says where it was cut (the play position, the sentence, the words heard of it), else None."""

    turn_id: int
    timeline: TurnTimeline
    answer: str
    spoken: str
    interrupted: bool
    cut: HeardCut | None = None


@dataclass(frozen=True)
class TurnFailed:
    turn_id: int
    message: str


@dataclass(frozen=True)
class SpeculationState:
    """A speculative answer "started" (thinking ahead, nothing shown or heard yet), was "confirmed" (its held
    events follow at once) or "cancelled" (dropped unheard)."""

    turn_id: int
    state: str


PipelineEvent = (
    TurnStarted | AssistantDelta | SentenceQueued | SentenceAudio | SentenceWords | WordSpoken | TurnFinished
    | TurnFailed | SpeculationState | Mark
)

CAPTION_HZ = 15.0
"""Most WordSpoken events a second: a caption faster than this is not read, and each one redraws the UI."""
CAPTION_IDLE_S = 0.25
"""Longest wait between two looks at the play position while the answer plays without word times to wait for."""


@dataclass
class PipelineSettings:
    mode: str = "bidi"
    voice: str = "af_heart"
    speed: float = 1.0
    audio_format: str = "mp3"
    system_prompt: str = "You are a helpful voice assistant. Answer in a few short spoken sentences."
    max_tokens: int = 256
    temperature: float = 0.7
    first_fragment_words: int = 6
    first_phrase_words: int = 4
    min_sentence_chars: int = 12
    pause_llm_for_first_audio: bool = True
    """Pause an embedded LLM (one with pause/resume) from the first sentence's request until all its audio has come,
    so the local TTS synthesizes it on every core (see voicecli.llm.local.LocalLLM.pause). Until its last audio, not
    its first: the endpoint sends a long first sentence in parts, and the later parts are decoded while the first
    one plays, where a slower decode would be heard as a gap."""
    stall_timeout_s: float = 30.0
    """A TTS request with no event for this long fails the turn with advice instead of hanging it."""


@dataclass
class _Turn:
    timeline: TurnTimeline
    answer_id: str
    audio: _TurnAudio | None = None
    """The reader of this turn's TTS events (made when the turn starts)."""
    request_index: dict[str, int] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    heard: set[int] = field(default_factory=set)
    llm_finished: asyncio.Event = field(default_factory=asyncio.Event)
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the sink reports progress or the turn is interrupted: what the wait for playback wakes on."""
    failure: str | None = None
    speculation: Speculation[PipelineEvent] | None = None
    """The guess this turn answers (None: an ordinary turn); it holds the turn's audio and events until released."""
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once _decide has acted on the verdict (what was held written to the sink, or the turn cancelled): the
    end of the answer waits on it, not on the task order of one event-loop turn."""
    llm_paused: bool = False
    """The embedded LLM is paused while the first sentence is synthesized (PipelineSettings)."""
    starts: dict[int, float] = field(default_factory=dict)
    """Where each sentence's audio starts in the answer's audio (seconds of samples written before it)."""
    written_s: float = 0.0
    """Seconds of the answer's audio decoded so far (written to the sink, or held)."""
    cut: HeardCut | None = None
    """Where an interruption cut the answer: taken the moment the sink stopped."""
    timed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when word times or a new sentence's audio arrive: what the caption's timer waits on between words."""

    @property
    def held(self) -> bool:
        """Speculative and not yet released: nothing of it is heard or shown."""
        return self.speculation is not None and self.speculation.holds

    @property
    def discarded(self) -> bool:
        """Speculative and withdrawn: it leaves no trace."""
        return self.speculation is not None and self.speculation.withdrawn

    @property
    def sentences(self) -> list[SentenceMarks]:
        """The answer's sentences live on the timeline, so the log and the TUI see per-sentence marks."""
        return self.timeline.sentences


class _Decoder:
    """One request's audio for the pipeline: undecodable MP3 is dropped and the turn goes on."""

    def __init__(self, audio_format: str) -> None:
        self._decoder = answer_decoder(audio_format)

    def feed(self, data: bytes) -> Samples:
        try:
            return self._decoder.feed(data)
        except Mp3DecodeError:
            return np.zeros(0, np.float32)

    def flush(self) -> Samples:
        return self._decoder.flush()


class _TurnAudio(AudioConsumer):
    """A turn's TTS events: first bytes become marks, audio goes to the sink (or is held while the turn is
    speculative), a finished request resumes a paused LLM, failures become the turn's failure."""

    def __init__(self, pipeline: VoicePipeline, turn: _Turn, transport: TTSTransport) -> None:
        settings = pipeline.settings
        super().__init__(transport, settings.stall_timeout_s, _Decoder, settings.audio_format)
        self.pipeline = pipeline
        self.turn = turn

    def _marks(self, entry: RequestAudio) -> SentenceMarks:
        return self.turn.sentences[self.turn.request_index[entry.request_id]]

    def first_byte(self, entry: RequestAudio) -> None:
        turn, marks = self.turn, self._marks(entry)
        assert entry.first_byte is not None
        marks.first_byte = entry.first_byte
        turn.timeline.mark("first_audio_byte", entry.first_byte)
        self.pipeline._emit(turn, SentenceAudio(turn.timeline.turn_id, marks.index))

    def audio(self, entry: RequestAudio, samples: Samples) -> None:
        marks = self._marks(entry)
        if marks.index not in self.turn.starts:
            self.turn.starts[marks.index] = self.turn.written_s
            self.turn.timed.set()
        marks.audio_s += samples.size / SAMPLE_RATE
        self.turn.written_s += samples.size / SAMPLE_RATE
        self.turn.heard.add(marks.index)
        self.pipeline._play(self.turn, samples)

    def timed(self, entry: RequestAudio, words: tuple[WordTiming, ...]) -> None:
        marks = self._marks(entry)
        self.turn.timed.set()
        self.pipeline._emit(self.turn, SentenceWords(self.turn.timeline.turn_id, marks.index, tuple(entry.words)))

    def finished(self, entry: RequestAudio) -> None:
        marks = self._marks(entry)
        marks.done = entry.done
        self.pipeline._resume_llm(self.turn)  # the first sentence is all synthesized (see PipelineSettings)
        if entry.timings is not None:
            marks.server_first_audio_ms = entry.timings.first_audio_ms

    def failed(self, entry: RequestAudio | None, event: AudioFailed) -> None:
        if entry is not None:
            index = self._marks(entry).index
            self.turn.failure = f"sentence {index + 1} could not be spoken: {event.message} ({event.code})"
        elif event.request_id is None:  # about the session, not one request (another id: a cancelled request)
            self.turn.failure = f"the TTS endpoint reported: {event.message}"


class VoicePipeline:
    """Runs turns one at a time. `transports` maps a mode ("bidi", "batch") to the transport that serves it."""

    def __init__(
        self,
        llm: LLM,
        transports: dict[str, TTSTransport],
        sink: AudioSink,
        settings: PipelineSettings,
        history: Conversation | None = None,
        on_event: Callable[[PipelineEvent], None] = lambda event: None,
        turn_ids: Iterator[int] | None = None,
    ) -> None:
        """`turn_ids`: where turn numbers come from (a race's lanes share one, so their turns and requests never
        share a number on the transports they share)."""
        self.llm = llm
        self.transports = transports
        self.sink = sink
        self.settings = settings
        # `is None`, not `or`: a Conversation with no messages yet is falsy (len 0), and `or` replaced the caller's
        # bounded one (llm.history_turns) with a default of 8 exchanges.
        self.history = history if history is not None else Conversation()
        self._on_event = on_event
        self._ids = turn_ids if turn_ids is not None else itertools.count(1)
        self._current: _Turn | None = None
        self._llm_task: asyncio.Task[None] | None = None
        self._reading_ahead: set[asyncio.Task[None]] = set()

    async def read_ahead(self) -> None:
        """Let an LLM that can (the embedded one: voicecli.llm.local.LocalLLM.prefill) read the next question's
        context now, the conversation as the next question will follow it: its first token then waits for little
        more than the question. The session awaits it at start-up (the system prompt alone); after each turn it runs
        in the background (`_read_ahead`) while the user listens or thinks."""
        prefill = getattr(self.llm, "prefill", None)
        if prefill is not None:
            await prefill(self.history.messages(), system=self.settings.system_prompt)

    def _read_ahead(self) -> None:
        """`read_ahead` in the background after a turn; a failure there is the next answer's to report."""
        task = asyncio.create_task(self.read_ahead())
        self._reading_ahead.add(task)
        task.add_done_callback(self._read)

    def _read(self, task: asyncio.Task[None]) -> None:
        self._reading_ahead.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("reading the next context ahead failed: %s", task.exception())

    @property
    def speaking(self) -> bool:
        """True while a turn is in progress (generating or playing): new input then means barge-in. A speculative
        turn still held is not speaking: the user may well go on talking, and that is not a barge-in."""
        return self._current is not None and not self._current.held

    async def turn(
        self,
        user_text: str,
        origin: str = "typed",
        marks: dict[str, float] | None = None,
        *,
        speculation: Speculation[PipelineEvent] | None = None,
        speculations: SpeculationCounts | None = None,
        utterance: int | None = None,
    ) -> TurnTimeline:
        """Answer one user turn, speaking as it goes. Returns the turn's timeline (also sent as TurnFinished).

        With `speculation` the turn answers that guess and is held until its verdict (see the module docstring); a
        withdrawn one returns its timeline with `interrupted` set and sends no TurnFinished. `speculations` are the
        counts of the user turn this answers, kept on its timeline (by default the speculation's); `utterance` the
        endpointer's number of a spoken turn (by default the speculation's).
        """
        turn_id = next(self._ids)
        mode = self.settings.mode
        turn = _Turn(TurnTimeline(turn_id, mode, origin), answer_id=f"turn-{turn_id}", speculation=speculation)
        timeline = turn.timeline
        timeline.listener = lambda mark: self._emit(turn, mark)
        if speculations is not None:
            timeline.speculations = speculations
        elif speculation is not None:
            timeline.speculations = speculation.counts
        timeline.utterance = utterance if utterance is not None or speculation is None else speculation.utterance
        for name, at in (marks or {}).items():
            timeline.mark(name, at)
        self._current = turn
        transport = self.transports[mode]
        turn.audio = _TurnAudio(self, turn, transport)
        loop = asyncio.get_running_loop()

        def wake() -> None:  # the sink may call it from its audio thread
            loop.call_soon_threadsafe(self._sink_moved)

        self.sink.watch(wake)
        if speculation is None:
            self.history.add_user(user_text)
            context = self.history.messages()
        else:
            self._on_event(SpeculationState(turn_id, "started"))
            context = self.history.messages_with(user_text)
        self._emit(turn, TurnStarted(turn_id, user_text, origin, mode))
        self._llm_task = asyncio.create_task(self._generate(turn, transport, context, batch=mode == "batch"))
        decider = None if speculation is None else asyncio.create_task(self._decide(turn, speculation, user_text))
        caption = asyncio.create_task(self._caption(turn))
        try:
            await self._receive(turn, transport)
            await self._llm_task
        except asyncio.CancelledError:
            turn.timeline.interrupted = True
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the caller cancelled the turn itself, not our LLM task
                self._llm_task.cancel()
                raise
        except AudioDeviceError as exc:  # the speaker went away mid-answer: say so, keep the session usable
            turn.failure = str(exc)
            self._llm_task.cancel()
            await transport.cancel(None)
        finally:
            self._current = None
            self._resume_llm(turn)
            caption.cancel()
            if decider is not None:
                decider.cancel()
        if turn.discarded:
            self._on_event(SpeculationState(turn_id, "cancelled"))
            return timeline
        spoken = " ".join(s.text for s in turn.sentences if s.index in turn.heard)
        answer = "".join(turn.text)
        if turn.timeline.interrupted:
            if turn.cut is None:  # cancelled by the caller, or stopped without interrupt(): the position now
                turn.cut = self.heard_cut(turn)
            spoken = turn.cut.spoken
            self.history.add_interrupted(spoken)
        elif turn.failure is None:
            self.history.add_assistant(answer)
        self._read_ahead()
        timeline.mark("turn_done")
        if turn.failure is not None:
            self._on_event(TurnFailed(turn_id, turn.failure))
        self._on_event(TurnFinished(turn_id, timeline, answer, spoken, timeline.interrupted,
                                    turn.cut if timeline.interrupted else None))
        return timeline

    def _plays(self, turn: _Turn) -> list[SentencePlay]:
        """Every sentence of the turn with audio: where it starts in the answer's audio, and its word times."""
        plays: list[SentencePlay] = []
        audio = turn.audio
        for rid, index in turn.request_index.items():
            if index not in turn.starts:
                continue
            marks = turn.sentences[index]
            entry = None if audio is None else audio.requests.get(rid)
            words = () if entry is None else tuple(entry.words)
            plays.append(SentencePlay(index, marks.text, turn.starts[index], marks.audio_s, words,
                                      complete=entry is not None and entry.done is not None))
        return sorted(plays, key=lambda play: play.start_s)

    def played_s(self, turn: _Turn) -> float:
        """Seconds of the turn's answer played so far: the sink's own count where it keeps one (the speaker), else
        the time since its first audible sample, as a listener playing in real time would be; at most what was
        written."""
        if turn.held:
            return 0.0
        if isinstance(self.sink, PlayPosition):
            position = self.sink.played_s(turn.answer_id)
            if position is not None:
                return min(turn.written_s, max(0.0, position))
        first = self.sink.first_played(turn.answer_id)
        if first is None:
            return 0.0
        return min(turn.written_s, max(0.0, time.monotonic() - first))

    def heard_cut(self, turn: _Turn) -> HeardCut:
        """What the listener has heard of the turn's answer at this moment (see voicecli.converse.heard)."""
        return cut_at(self._plays(turn), self.played_s(turn))

    async def _caption(self, turn: _Turn) -> None:
        """Tell the UI the word being played each time it changes (WordSpoken), at most CAPTION_HZ times a second:
        a timer set for the next word's start, re-reading the play position then (word times are predictions of
        the audio; the position is the sink's)."""
        shown: tuple[int, int] | None = None
        while True:
            turn.timed.clear()
            wait: float | None = None
            plays = self._plays(turn)
            played = self.played_s(turn)
            position = locate(plays, played)
            if position is not None and plays[position].words:
                play = plays[position]
                into_ms = (played - play.start_s) * 1000
                word = current_word(play.words, into_ms)
                if word is not None and (play.index, word) != shown:
                    shown = (play.index, word)
                    self._emit(turn, WordSpoken(turn.timeline.turn_id, play.index, word))
                upcoming = [w.start_ms for w in play.words if w.start_ms > into_ms]
                wait = (upcoming[0] - into_ms) / 1000 if upcoming else CAPTION_IDLE_S
            elif any(play.words for play in plays):  # between sentences, or before the first sound
                wait = CAPTION_IDLE_S
            if wait is None:  # nothing timed yet: wait for word times, no timer
                await turn.timed.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(turn.timed.wait(), max(1 / CAPTION_HZ, wait))
                await asyncio.sleep(1 / CAPTION_HZ if turn.timed.is_set() else 0)

    def _sink_moved(self) -> None:
        """The sink reported progress (on the event loop's thread by now): mark what was heard, wake the turn."""
        turn = self._current
        if turn is not None:
            self._check_played(turn)
            turn.moved.set()

    def _emit(self, turn: _Turn, event: PipelineEvent) -> None:
        """Send a turn's event to the UI, or keep it while the turn is held (a speculative answer shows nothing)."""
        if turn.discarded:
            return
        if turn.speculation is not None and turn.speculation.holds:
            turn.speculation.hold_event(event)
        else:
            self._on_event(event)

    async def _decide(self, turn: _Turn, speculation: Speculation[PipelineEvent], user_text: str) -> None:
        """Wait for a speculative turn's verdict; play what it held, or cancel it unheard (then `turn.settled`)."""
        try:
            await self._settle(turn, speculation, user_text)
        finally:
            turn.settled.set()

    async def _settle(self, turn: _Turn, speculation: Speculation[PipelineEvent], user_text: str) -> None:
        if not await speculation.verdict():
            await self._cancel(turn)
            return
        self.history.add_user(user_text)
        events, held = speculation.release()
        for name, at in speculation.confirmed_marks.items():
            turn.timeline.mark(name, at)
        self._on_event(SpeculationState(turn.timeline.turn_id, "confirmed"))
        for event in events:
            self._on_event(event)
        if turn.timeline.interrupted:  # a barge-in between the confirmation and now: shown, but none of it heard
            return
        try:
            for samples in held:
                self.sink.write(samples, turn.answer_id)
        except AudioDeviceError as exc:  # as in turn(): say so, keep the session usable
            turn.failure = str(exc)
            await self._cancel(turn)

    def stop_audio(self) -> float:
        """Silence the speaker now (synchronously: barge-in must not wait for the event loop). Returns the time."""
        self.sink.stop()
        return time.monotonic()

    def hold_audio(self) -> None:
        """Pause the speaker, dropping nothing (the user may be starting to talk over the answer): `stop_audio` or
        `release_audio` follows. A sink nobody hears (not Holdable) has nothing to hold."""
        if isinstance(self.sink, Holdable):
            self.sink.hold()

    def release_audio(self) -> None:
        """Play on after `hold_audio` (the speech that held it faded: not a barge-in)."""
        if isinstance(self.sink, Holdable):
            self.sink.release()

    async def interrupt(self) -> None:
        """Barge-in: silence now, then cancel generation and every pending synthesis (connection stays open)."""
        turn = self._current
        self.stop_audio()
        if turn is None:
            return
        speculation = turn.speculation
        if speculation is not None and speculation.withdraw():  # a guess nobody heard: dropped without a trace
            turn.moved.set()
            return
        if turn.cut is None:
            turn.cut = self.heard_cut(turn)  # the position the sink stopped at, before anything moves on
        turn.timeline.interrupted = True
        turn.moved.set()
        await self._cancel(turn)

    async def _cancel(self, turn: _Turn) -> None:
        """Stop a turn's generation and every synthesis it has pending, on the same connection."""
        turn.timeline.interrupted = True
        if self._llm_task is not None:
            self._llm_task.cancel()
        await self.transports[turn.timeline.mode].cancel(None)
        if turn.audio is not None:
            turn.audio.forget()
            turn.audio.close()
        turn.llm_finished.set()
        turn.moved.set()

    async def _generate(self, turn: _Turn, transport: TTSTransport, context: list[ChatMessage], batch: bool) -> None:
        """LLM deltas -> segmenter -> TTS requests (each sentence at once in bidi; everything at the end in batch)."""
        settings = self.settings
        timeline = turn.timeline
        segmenter = Segmenter(settings.first_fragment_words if not batch else 0, settings.min_sentence_chars,
                              settings.first_phrase_words if not batch else 0)
        timeline.mark("llm_request")
        try:
            stream = self.llm.stream(context, system=settings.system_prompt,
                                     max_tokens=settings.max_tokens, temperature=settings.temperature)
            async with contextlib.aclosing(stream) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        timeline.mark("llm_first_token")
                        turn.text.append(event.text)
                        self._emit(turn, AssistantDelta(timeline.turn_id, event.text))
                        if not batch:
                            for sentence in segmenter.feed(event.text):
                                await self._speak(turn, transport, sentence)
                    elif isinstance(event, StreamEnd):
                        break
            timeline.mark("llm_done")
            if batch:
                whole = speakable_text("".join(turn.text))
                if whole:
                    await self._speak(turn, transport, whole)
            else:
                for sentence in segmenter.flush():
                    await self._speak(turn, transport, sentence)
        except LLMError as exc:
            turn.failure = str(exc)
        except TransportError as exc:
            turn.failure = str(exc)
        finally:
            turn.llm_finished.set()
            if turn.audio is not None:
                turn.audio.close()  # no more sentences: the reader ends once their audio is in

    async def _speak(self, turn: _Turn, transport: TTSTransport, text: str) -> None:
        timeline = turn.timeline
        index = len(turn.sentences)
        marks = SentenceMarks(index, text)
        turn.sentences.append(marks)
        timeline.mark("first_sentence_ready")
        request_id = f"{turn.answer_id}-{index}"
        turn.request_index[request_id] = index
        assert turn.audio is not None
        turn.audio.track(request_id)
        self._emit(turn, SentenceQueued(timeline.turn_id, index, text))
        await transport.send(SpeechRequest(request_id, text, self.settings.voice, self.settings.speed,
                                           "pcm16" if self.settings.audio_format == "pcm16" else "mp3",
                                           word_timings=True))  # what was heard of it, to the word (heard.py)
        marks.sent = time.monotonic()
        timeline.mark("tts_first_request_sent", marks.sent)
        if index == 0 and self.settings.pause_llm_for_first_audio:
            pause = getattr(self.llm, "pause", None)  # an embedded LLM shares the cores with the local TTS
            if pause is not None:
                pause()
                turn.llm_paused = True

    async def _receive(self, turn: _Turn, transport: TTSTransport) -> None:
        """Audio events -> decoder -> sink, until the LLM is done and every sentence's audio has arrived; then
        wait (woken by the sink, never polling) until it has played."""
        timeline = turn.timeline
        assert turn.audio is not None
        try:
            await turn.audio.run()
        except Stalled:
            turn.failure = (f"the TTS endpoint sent nothing for {self.settings.stall_timeout_s:.0f} s; "
                            "it may be overloaded or stuck: check `voicecli doctor`, or restart it")
            await transport.cancel(None)
            turn.audio.forget()
            if self._llm_task is not None:
                self._llm_task.cancel()
        if turn.speculation is not None:
            await turn.settled.wait()  # a speculative answer goes on once its verdict was acted on (played, cancelled)
        if turn.discarded:
            return
        self.sink.finish(turn.answer_id)
        while True:
            turn.moved.clear()  # cleared before looking, so a wake that comes meanwhile is not lost
            self._check_played(turn)
            if timeline.interrupted or self.sink.drained():
                break
            await turn.moved.wait()
        self._check_played(turn)
        timeline.underruns = self.sink.underruns(turn.answer_id)

    def _resume_llm(self, turn: _Turn) -> None:
        if turn.llm_paused:
            turn.llm_paused = False
            resume = getattr(self.llm, "resume", None)
            if resume is not None:
                resume()

    def _play(self, turn: _Turn, samples: Samples) -> None:
        if turn.speculation is not None and turn.speculation.holds:
            turn.speculation.hold_audio(samples)
        elif not turn.discarded:
            self.sink.write(samples, turn.answer_id)

    def _check_played(self, turn: _Turn) -> None:
        if "first_audio_played" not in turn.timeline.marks:
            played = self.sink.first_played(turn.answer_id)
            if played is not None:
                turn.timeline.mark("first_audio_played", played)
