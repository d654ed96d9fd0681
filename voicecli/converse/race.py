"""The demo race: one question, answered once, spoken by both paths on the same endpoint, timed on one clock.

`voicecli demo` (and F7 in the chat) shows visitors why answers are spoken sentence by sentence: the same answer
goes through batch (the whole text in one request) and bidi (each sentence over the one WebSocket as soon as it is
written), and the screen shows both timelines and the speed-up, batch first audio / bidi first audio.

How the comparison is kept fair (one answer text, one LLM pace, one endpoint, nothing else running):

- The question is generated ONCE, live, on the batch path, and every text delta's arrival time is recorded
  (`RecordingLLM`). The bidi path then gets the very same deltas at the very same offsets from its own LLM request
  (`ReplayLLM`): same words, same sentence boundaries, same LLM pace.
- Why batch is the live one: batch sends nothing to TTS until the last token, so its LLM runs with the cores to
  itself and the recording is the LLM's own pace. A live bidi run overlaps synthesis with generation (and pauses
  an embedded LLM while its first sentence is synthesized), which would slow the recording and charge that to
  batch on replay. The replay honours the pipeline's pause of an embedded LLM the way the real one would.
- Why not both at once: on a 2-core machine the two paths would share the LLM and the TTS engine and slow each
  other unpredictably; one after the other, each has the endpoint to itself.
- "First audio played" is the moment decoded audio is handed to the output, for BOTH paths: only the bidi answer
  is played (a visitor hears one answer, without overlap), so a speaker's device latency, which batch would never
  pay, is kept out of both. Every mark comes from the pipeline's own TurnTimeline.

The tally keeps the speed-ups of the races run at this desk (count, p50).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field, replace

from voicecli.audio.pcm import Samples
from voicecli.converse.pipeline import PipelineEvent, PipelineSettings, TurnFailed, VoicePipeline
from voicecli.converse.timeline import Percentiles, TurnTimeline, summarize
from voicecli.llm.base import LLM, ChatMessage, StreamEnd, StreamEvent, TextDelta
from voicecli.llm.history import Conversation
from voicecli.playback.sinks import AudioSink, CollectingSink, FirstWrites
from voicecli.tts.base import TransportError, TTSTransport

DEMO_QUESTIONS: tuple[str, ...] = (
    "Why is the sky blue?",
    "How do bees make honey?",
    "What makes a good cup of tea?",
    "Why do cats purr?",
    "How does a rainbow form?",
    "What is the best way to learn a new language?",
    "Why do leaves change colour in autumn?",
    "How do airplanes stay in the air?",
)
"""Questions whose answers run to several sentences: the more the answer has after its first sentence, the more
bidi saves (a one-sentence answer makes the two paths nearly equal)."""

LANES: tuple[str, ...] = ("batch", "bidi")
"""The order the paths run in: batch first, live (see the module docstring for why)."""

PLAYED_LANE = "bidi"
BATCH_STALL_TIMEOUT_S = 300.0
"""Batch sends nothing until the whole answer is synthesized: tens of seconds for a long answer on a busy CPU."""


# --- one answer, recorded once, replayed with its timing --------------------------------------------------------


@dataclass(frozen=True)
class RecordedAnswer:
    """What the LLM wrote and when: (seconds after the stream began, text) per delta, and how it ended."""

    deltas: tuple[tuple[float, str], ...]
    stop_reason: str

    @property
    def text(self) -> str:
        return "".join(text for _, text in self.deltas)


class RecordingLLM:
    """Passes a live LLM's stream through unchanged and records each delta's arrival time (for `ReplayLLM`)."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.deltas: list[tuple[float, str]] = []
        self.stop_reason = "end_turn"

    async def stream(self, messages: list[ChatMessage], *, system: str, max_tokens: int,
                     temperature: float) -> AsyncGenerator[StreamEvent, None]:
        self.deltas.clear()
        events = self.inner.stream(messages, system=system, max_tokens=max_tokens, temperature=temperature)
        start = time.monotonic()  # the generator body runs at the pipeline's first read, right after llm_request
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    self.deltas.append((time.monotonic() - start, event.text))
                elif isinstance(event, StreamEnd):
                    self.stop_reason = event.stop_reason
                yield event

    def pause(self, max_s: float = 2.0) -> None:
        pause = getattr(self.inner, "pause", None)
        if pause is not None:
            pause(max_s)

    def resume(self) -> None:
        resume = getattr(self.inner, "resume", None)
        if resume is not None:
            resume()

    def recording(self) -> RecordedAnswer:
        return RecordedAnswer(tuple(self.deltas), self.stop_reason)

    async def aclose(self) -> None:
        """The live LLM belongs to the session that lent it: closing the recorder leaves it open."""


class ReplayLLM:
    """Replays a `RecordedAnswer`: each delta at its recorded offset from the stream's start, then its StreamEnd.

    `pausable`: the recorded LLM was an embedded one that the pipeline pauses while the first sentence is synthesized
    (voicecli.llm.local.LocalLLM.pause); the replay then holds its deltas while paused, at most `max_s`, and shifts
    the rest by the time it held, as that LLM would. A remote LLM is never paused, nor is its replay.
    """

    def __init__(self, answer: RecordedAnswer, pausable: bool = False) -> None:
        self.answer = answer
        self.pausable = pausable
        self._paused_at: float | None = None
        self._pause_limit = 0.0
        self._shift = 0.0
        self._resumed = asyncio.Event()

    async def stream(self, messages: list[ChatMessage], *, system: str, max_tokens: int,
                     temperature: float) -> AsyncGenerator[StreamEvent, None]:
        start = time.monotonic()
        self._shift = 0.0
        for offset, text in self.answer.deltas:
            await self._held()
            delay = start + offset + self._shift - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            yield TextDelta(text)
        await self._held()
        yield StreamEnd(self.answer.stop_reason)

    async def _held(self) -> None:
        if self._paused_at is None:
            return
        left = self._paused_at + self._pause_limit - time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._resumed.wait(), max(0.0, left))
        self.resume()

    def pause(self, max_s: float = 2.0) -> None:
        if self.pausable and self._paused_at is None:
            self._paused_at = time.monotonic()
            self._pause_limit = max_s
            self._resumed.clear()

    def resume(self) -> None:
        if self._paused_at is not None:
            self._shift += min(time.monotonic() - self._paused_at, self._pause_limit)
            self._paused_at = None
            self._resumed.set()

    async def aclose(self) -> None:
        pass


# --- the measures shown -----------------------------------------------------------------------------------------


def first_audio_ms(timeline: TurnTimeline | None) -> float | None:
    """From the LLM request to the first audio handed to the output: each path's own start, one definition."""
    return None if timeline is None else timeline.ms("llm_request", "first_audio_played")


def speedup(batch: TurnTimeline | None, bidi: TurnTimeline | None) -> float | None:
    """batch first audio / bidi first audio, from the marks; None until both have one."""
    slow, fast = first_audio_ms(batch), first_audio_ms(bidi)
    if slow is None or fast is None or fast <= 0:
        return None
    return slow / fast


@dataclass(frozen=True)
class LiveSpeedup:
    """What the big number shows while the race runs: `bound` is "" (final), "≤" (bidi still silent after this long:
    the speed-up can only shrink as it waits) or "" with value None (batch has no first audio yet)."""

    value: float | None
    bound: str = ""


def live_speedup(batch: TurnTimeline | None, bidi: TurnTimeline | None, now: float | None = None) -> LiveSpeedup:
    """The speed-up as far as it is known at `now`: final once both have first audio; an upper bound while bidi
    (which runs second) is still silent, shrinking as it waits."""
    final = speedup(batch, bidi)
    if final is not None:
        return LiveSpeedup(final)
    slow = first_audio_ms(batch)
    if slow is None or bidi is None or "llm_request" not in bidi.marks or bidi.interrupted:
        return LiveSpeedup(None)
    waited = ((time.monotonic() if now is None else now) - bidi.marks["llm_request"]) * 1000
    return LiveSpeedup(slow / waited, "≤") if waited > 0 and slow / waited >= 1.0 else LiveSpeedup(None)


def network_share_ms(timeline: TurnTimeline | None) -> tuple[float, float] | None:
    """(client wait for the first audio byte, the part of it not spent in the endpoint) for the first request, when
    the transport reports the endpoint's own time (the WebSocket and SageMaker's bidirectional stream do)."""
    if timeline is None or not timeline.sentences:
        return None
    first = timeline.sentences[0]
    if first.sent is None or first.first_byte is None or first.server_first_audio_ms is None:
        return None
    wait = (first.first_byte - first.sent) * 1000
    return wait, max(0.0, wait - first.server_first_audio_ms)


class RaceTally:
    """The speed-ups of the races completed at this desk: count and p50."""

    def __init__(self) -> None:
        self.speedups: list[float] = []

    def add(self, value: float) -> None:
        self.speedups.append(value)

    @property
    def count(self) -> int:
        return len(self.speedups)

    def summary(self) -> Percentiles | None:
        return summarize(self.speedups)


# --- the race -----------------------------------------------------------------------------------------------------


@dataclass
class RaceResult:
    question: str
    timelines: dict[str, TurnTimeline] = field(default_factory=dict)
    answer: str = ""
    failure: str | None = None

    @property
    def speedup(self) -> float | None:
        return speedup(self.timelines.get("batch"), self.timelines.get("bidi"))

    @property
    def completed(self) -> bool:
        return self.failure is None and all(
            lane in self.timelines and not self.timelines[lane].interrupted
            and {"first_audio_played", "turn_done"} <= set(self.timelines[lane].marks) for lane in LANES)


class _Played:
    """The played lane's sink: the session's output under its own answer ids (a shared speaker keeps timings per
    id), with "first played" taken at the first write, as for the lane that is only kept (see the module docstring)."""

    def __init__(self, output: AudioSink, prefix: str) -> None:
        self.output = output
        self.prefix = prefix
        self._first = FirstWrites()

    def write(self, samples: Samples, answer_id: str) -> None:
        self._first.stamp(answer_id)
        self.output.write(samples, self.prefix + answer_id)

    def watch(self, wake: Callable[[], None]) -> None:
        """First played is the first write (woken here); the output wakes the wait for it to play out."""
        self._first.wake = wake
        self.output.watch(wake)

    def first_played(self, answer_id: str) -> float | None:
        return self._first.first_played(answer_id)

    def stop(self) -> None:
        self.output.stop()

    def drained(self) -> bool:
        return self.output.drained()

    def finish(self, answer_id: str) -> None:
        self.output.finish(self.prefix + answer_id)

    def underruns(self, answer_id: str) -> int:
        return self.output.underruns(self.prefix + answer_id)

    def close(self) -> None:
        """The output belongs to the session."""


RaceListener = Callable[[str, PipelineEvent], None]
"""Told every pipeline event of a race with the lane ("batch" or "bidi") it belongs to."""


class Race:
    """Runs questions through both paths, one after the other, over a session's LLM, transports and output.

    The transports are the session's own (the one WebSocket for bidi, the batch transport for batch): the same
    endpoint, already warm. Nothing else may use them while a race runs.
    """

    def __init__(self, llm: LLM, transports: dict[str, TTSTransport], output: AudioSink, settings: PipelineSettings,
                 on_event: RaceListener = lambda lane, event: None) -> None:
        self.llm = llm
        self.transports = transports
        self.output = output
        self.settings = replace(settings)
        self.on_event = on_event
        self.lane = LANES[0]
        self.tally = RaceTally()
        self.races = 0
        self.batch_audio: CollectingSink | None = None
        """The last race's batch answer, kept (not played) for `play_batch`."""
        self._failures: list[str] = []
        self._pipeline: VoicePipeline | None = None
        """The lane running now: each lane of each race is a pipeline of its own (its LLM, sink and mode)."""
        self._turn_ids = itertools.count(1)

    def _forward(self, event: PipelineEvent) -> None:
        if isinstance(event, TurnFailed):
            self._failures.append(event.message)
        self.on_event(self.lane, event)

    @property
    def running(self) -> bool:
        return self._pipeline is not None and self._pipeline.speaking

    async def run(self, question: str, origin: str = "typed") -> RaceResult:
        """One race. A failure (endpoint gone, LLM error) ends it with `failure` saying what happened and what to
        do; the race object stays usable, so the next question simply tries again."""
        self.races += 1
        result = RaceResult(question)
        recorder = RecordingLLM(self.llm)
        held = CollectingSink()
        try:
            batch = await self._lane("batch", recorder, held, question, origin, BATCH_STALL_TIMEOUT_S)
            result.timelines["batch"] = batch
            result.answer = recorder.recording().text
            if self._failures or batch.interrupted:
                result.failure = self._explain("batch", batch)
                return result
            self.batch_audio = held
            replay = ReplayLLM(recorder.recording(), pausable=getattr(self.llm, "pause", None) is not None)
            played = _Played(self.output, f"race-{self.races}-")
            bidi = await self._lane("bidi", replay, played, question, origin, self.settings.stall_timeout_s)
            result.timelines["bidi"] = bidi
            if self._failures or bidi.interrupted:
                result.failure = self._explain("bidi", bidi)
                return result
        except TransportError as exc:
            result.failure = f"the {self.lane} path lost the endpoint: {exc}. {_AGAIN}"
            return result
        value = result.speedup
        if value is not None:
            self.tally.add(value)
        return result

    async def _lane(self, lane: str, llm: LLM, sink: AudioSink, question: str, origin: str,
                    stall_timeout_s: float) -> TurnTimeline:
        self.lane = lane
        self._failures.clear()
        settings = replace(self.settings, mode=lane, stall_timeout_s=stall_timeout_s)
        # a fresh history: every race answers the question alone, as the first turn
        self._pipeline = VoicePipeline(llm, self.transports, sink, settings, Conversation(), self._forward,
                                       self._turn_ids)
        return await self._pipeline.turn(question, origin)

    def _explain(self, lane: str, timeline: TurnTimeline) -> str:
        if self._failures:
            return f"the {lane} path failed: {self._failures[0]}. {_AGAIN}"
        return f"the race was stopped during the {lane} path: ask another question when ready"

    async def interrupt(self) -> None:
        """Stop the race now (audio, generation, pending synthesis); the connection stays open."""
        if self._pipeline is not None:
            await self._pipeline.interrupt()

    def play_batch(self) -> bool:
        """Play the last race's batch answer (kept, not played, during the race); False when there is none."""
        if self.batch_audio is None or not self.batch_audio.chunks:
            return False
        self.output.stop()
        answer_id = f"race-{self.races}-batch-replay"
        for chunk in self.batch_audio.chunks:
            self.output.write(chunk, answer_id)
        self.output.finish(answer_id)
        return True


_AGAIN = "Nothing was lost: ask again (the next question reconnects), and check the endpoint with `voicecli doctor`"
