"""The race screen: one question through batch and bidi, as two racing bars on one time axis, and the speed-up.

The race itself (one answer, recorded once and replayed, both paths on the same endpoint) is voicecli.converse.race;
this screen only draws the two TurnTimelines as they fill in, the speed-up in large type, and the tally of this desk.
`voicecli demo` opens it on its own; F7 in the chat opens it over the chat's session.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Digits, Footer, Input, Static

from voicecli.converse.pipeline import AssistantDelta, PipelineEvent, TurnStarted
from voicecli.converse.race import (
    DEMO_QUESTIONS,
    LANES,
    PLAYED_LANE,
    Race,
    RaceResult,
    RaceTally,
    first_audio_ms,
    live_speedup,
    network_share_ms,
)
from voicecli.converse.timeline import Mark, TurnTimeline
from voicecli.playback.sinks import CollectingSink

if TYPE_CHECKING:
    from voicecli.config import Config
    from voicecli.converse.session import Session
    from voicecli.listen.listener import ListenEvent

HELP = ("1-8 ask a question below · t type your own · b play the batch answer · s save SVG/PNG · "
        "Esc stop / back")

FAIRNESS = ("Fair race: the answer is written once, live, on the batch path, and its tokens are replayed at the "
            "same pace for bidi; the paths run one after the other on the same endpoint, so neither slows the other.")

LANE_STYLE = {"batch": "yellow", "bidi": "green"}
LABEL_WIDTH = 20
"""The figures right of each track (" 1st audio  12.34 s")."""


def _seconds(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000:.2f} s"


class RaceBars(Static):
    """Both paths on one time axis from their own LLM request: the LLM writing (░ waiting for the first token,
    ▒ tokens), then speech (▲ each sentence sent, ─ waiting, ◆ first audio byte, █ audio from the first played,
    ┃ done)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.timelines: dict[str, TurnTimeline] = {}
        self.running: str | None = None

    def show(self, timelines: dict[str, TurnTimeline], running: str | None) -> None:
        self.timelines = dict(timelines)
        self.running = running
        self.refresh_view()

    def refresh_view(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        width = max(10, (self.size.width or 80) - 13 - LABEL_WIDTH)
        spans = {lane: self._span_ms(timeline, now, lane == self.running)
                 for lane, timeline in self.timelines.items()}
        horizon = max([*spans.values(), 1000.0])
        text = Text(no_wrap=True, overflow="crop")  # wrapping would drop the indents that align the tracks
        for lane in LANES:
            timeline = self.timelines.get(lane)
            style = LANE_STYLE[lane]
            played = " ♪" if lane == PLAYED_LANE else ""
            text.append(f"{lane.upper():6}{played:2} ", style=f"bold {style}")
            if timeline is None:
                text.append("waiting for its turn\n\n", style="dim")
                continue
            end = spans[lane]
            text.append("LLM ", style="dim")
            text.append_text(self._llm_track(timeline, end, horizon, width))
            text.append(f" done {_seconds(timeline.ms('llm_request', 'llm_done')):>8}\n", style="dim")
            text.append(" " * 9)  # its own segment: SVG renderers (rsvg) drop spaces leading a styled run
            text.append("TTS ", style="dim")
            text.append_text(self._tts_track(timeline, end, horizon, width, style))
            text.append(f" 1st audio {_seconds(first_audio_ms(timeline)):>8}\n", style=f"bold {style}")
        text.append(" " * 13)
        text.append(self._axis(horizon, width), style="dim")
        text.append("\n")
        text.append("░ LLM thinking  ▒ LLM writing  ▲ sentence sent  ◆ first audio byte  █ audio  ┃ done  ♪ played",
                    style="dim")
        self.update(text)

    @staticmethod
    def _span_ms(timeline: TurnTimeline, now: float, running: bool) -> float:
        start = timeline.marks.get("llm_request", timeline.started)
        end = timeline.marks.get("turn_done") or (now if running else max(timeline.marks.values(), default=start))
        return max(0.0, (end - start) * 1000)

    @staticmethod
    def _cell(ms: float, horizon: float, width: int) -> int:
        return max(0, min(width - 1, int(ms / horizon * width)))

    def _llm_track(self, timeline: TurnTimeline, end: float, horizon: float, width: int) -> Text:
        cells = [" "] * width
        first = timeline.ms("llm_request", "llm_first_token")
        done = timeline.ms("llm_request", "llm_done")
        upto = self._cell(end if done is None else done, horizon, width)
        for i in range(upto + 1 if end > 0 else 0):
            cells[i] = "▒" if first is not None and i >= self._cell(first, horizon, width) else "░"
        return Text("".join(cells), style="cyan")

    def _tts_track(self, timeline: TurnTimeline, end: float, horizon: float, width: int, style: str) -> Text:
        cells = [" "] * width
        styles = [""] * width
        sent = timeline.ms("llm_request", "tts_first_request_sent")
        played = first_audio_ms(timeline)
        last = self._cell(end, horizon, width)
        if sent is not None:
            for i in range(self._cell(sent, horizon, width), last + 1):
                audible = played is not None and i >= self._cell(played, horizon, width)
                cells[i], styles[i] = ("█", style) if audible else ("─", "dim")
        origin = timeline.marks.get("llm_request", timeline.started)
        for sentence in timeline.sentences:
            if sentence.sent is not None:
                i = self._cell((sentence.sent - origin) * 1000, horizon, width)
                cells[i], styles[i] = "▲", "bold"
        byte = timeline.ms("llm_request", "first_audio_byte")
        if byte is not None:
            i = self._cell(byte, horizon, width)
            cells[i], styles[i] = "◆", "bold"
        if "turn_done" in timeline.marks and cells[last] != "◆":  # batch: the first byte comes with the last
            cells[last], styles[last] = "┃", "bold"
        text = Text()
        for char, char_style in zip(cells, styles, strict=True):
            text.append(char, style=char_style)
        return text

    @staticmethod
    def _axis(horizon: float, width: int) -> str:
        step = next(s for s in (250, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000, 1e9) if horizon / s <= 8)
        axis = [" "] * (width + 8)
        at = 0.0
        while at <= horizon:
            label = f"{at / 1000:g}s"
            i = int(at / horizon * width)
            for k, char in enumerate(label):
                if i + k < len(axis):
                    axis[i + k] = char
            at += step
        return "".join(axis).rstrip()


class RaceScreen(Screen[None]):
    """One race at a time: ask (typed, picked or spoken), watch both bars, hear the bidi answer."""

    CSS_PATH = "demo_app.tcss"
    AUTO_FOCUS = ""  # keys 1-8, n, t, b, s belong to the screen; the input takes focus only with t
    BINDINGS = [
        *(Binding(str(i + 1), f"ask_builtin({i})", show=False) for i in range(min(8, len(DEMO_QUESTIONS)))),
        Binding("n", "ask_next", "Next question"),
        Binding("t", "type_question", "Type"),
        Binding("b", "play_batch", "Play batch"),
        Binding("s", "save", "Save SVG"),
        Binding("escape", "back", "Stop / back"),
    ]

    def __init__(self, config: Config, out_dir: Path | None = None) -> None:
        super().__init__()
        self.config = config
        self.out_dir = out_dir or Path.cwd()
        self.session: Session | None = None
        self.race: Race | None = None
        self.result: RaceResult | None = None
        self.live: dict[str, TurnTimeline] = {}
        self.answer_text: list[str] = []
        self.next_question = 0
        self.race_task: asyncio.Task[RaceResult] | None = None
        self.saved: list[Path] = []

    def compose(self) -> ComposeResult:
        yield Static("starting…", id="race-status")
        with Horizontal(id="race-top"):
            with Vertical(id="race-speedup"):
                yield Digits("-", id="speedup")
                yield Static("", id="speedup-caption")
            yield Static("", id="race-tally")
        yield RaceBars(id="race-bars")
        yield Static("", id="race-answer")
        yield Static("", id="race-message")
        yield Static(self._question_list(), id="race-questions")
        yield Input(placeholder="t: type a question, Enter to race it", id="race-input")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(0.1, self._tick)
        self._draw()

    # --- wiring ---------------------------------------------------------------------------------------------

    def attach(self, session: Session, audio_note: str) -> None:
        """Race over this session's LLM, transports and output (the chat's own, or the demo's)."""
        from voicecli.converse.session import pipeline_settings

        self.session = session
        self.race = Race(session.pipeline.llm, session.transports, session.pipeline.sink,
                         pipeline_settings(self.config), self.on_race_event)
        self.race.settings.voice = session.pipeline.settings.voice
        silent = isinstance(session.pipeline.sink, CollectingSink)
        audio = (f"NO AUDIO: {audio_note}; text and bars only, nothing is played" if silent
                 else "the bidi answer is played; b plays the batch one")
        status = Text()
        status.append(f"TTS {session.endpoint_label} │ ", style="bold")
        status.append(audio, style="bold red" if silent else "")
        status.append(f"\n{FAIRNESS}", style="dim")
        self.query_one("#race-status", Static).update(status)
        self.message("ready: press 1-8 for a question, t to type one" + (" or speak" if self._listening() else ""))

    def _listening(self) -> bool:
        return getattr(self.app, "listener", None) is not None

    def failed_to_start(self, message: str) -> None:
        self.query_one("#race-status", Static).update(Text("could not start (see below)", style="bold red"))
        self.message(message, error=True)

    def on_listen(self, event: ListenEvent) -> None:
        """A spoken question (a confirmed turn; drafts are ignored: the race answers whole questions)."""
        from voicecli.listen.listener import SpokenTurn

        if isinstance(event, SpokenTurn) and event.text.strip():
            self.ask(event.text.strip(), "spoken")

    def on_race_event(self, lane: str, event: PipelineEvent) -> None:
        if isinstance(event, Mark):  # each mark carries its turn's live timeline: the bars follow what is pushed
            self.live[lane] = event.timeline
        if isinstance(event, TurnStarted) and lane == "batch":
            self.answer_text.clear()
        elif isinstance(event, AssistantDelta) and lane == "batch":  # the live answer, as it is written
            self.answer_text.append(event.text)

    # --- racing ---------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.race_task is not None and not self.race_task.done()

    def ask(self, question: str, origin: str = "typed") -> None:
        if self.race is None:
            self.notify("still starting: wait for 'ready'", severity="warning")
            return
        if self.running:
            self.notify("a race is running: wait for it, or Esc to stop it", severity="warning")
            return
        self.result = RaceResult(question)
        self.live = {}
        self.answer_text = []
        self.message(f"racing: “{question}” (batch first, silent; then bidi, played)")
        self.race_task = asyncio.create_task(self._run(question, origin))

    async def _run(self, question: str, origin: str) -> RaceResult:
        assert self.race is not None
        try:
            result = await self.race.run(question, origin)
        except Exception as exc:  # an unexpected failure ends this race with a message, never the screen
            result = RaceResult(question, failure=f"the race failed: {exc!r}; ask again, or check `voicecli doctor`")
        self.result = result
        self.live = dict(result.timelines)
        if result.failure is not None:
            self.message(result.failure, error=True)
        else:
            self.message("done: press 1-8 or t for another question, b to hear the batch answer, s to save")
        self._draw()
        return result

    def _tick(self) -> None:
        if self.running or self.live:
            self._draw()

    def _draw(self) -> None:
        running = self.race.lane if self.running and self.race is not None else None
        self.query_one(RaceBars).show(self.live, running)
        batch, bidi = self.live.get("batch"), self.live.get("bidi")
        live = live_speedup(batch, bidi)
        digits = "-" if live.value is None else f"{live.value:.1f}x"
        self.query_one("#speedup", Digits).update(digits)
        caption = Text()
        if live.value is None:
            caption.append("speed-up: batch first audio / bidi first audio", style="dim")
            if running == "batch":
                caption.append("\nbatch is writing and synthesizing the whole answer…", style="yellow")
        elif live.bound:
            caption.append(f"{live.bound} {live.value:.1f}×: bidi has not spoken yet", style="bold")
        else:
            caption.append(f"bidi speaks {live.value:.1f}× sooner: {_seconds(first_audio_ms(bidi))} "
                           f"vs {_seconds(first_audio_ms(batch))}", style="bold green")
        for lane in LANES:
            share = network_share_ms(self.live.get(lane))
            if share is not None:
                wait, network = share
                caption.append(f"\n{lane}: {network:.0f} of {wait:.0f} ms to the first byte outside the endpoint "
                               "(network, transport)", style="dim")
        self.query_one("#speedup-caption", Static).update(caption)
        self.query_one("#race-tally", Static).update(self._tally())
        answer = Text()
        if self.result is not None:
            answer.append(f"you: {self.result.question}\n", style="bold")
            answer.append("answer: " + ("".join(self.answer_text) or "…"))
        self.query_one("#race-answer", Static).update(answer)

    def _tally(self) -> Text:
        tally: RaceTally = self.race.tally if self.race is not None else RaceTally()
        summary = tally.summary()
        text = Text("this desk\n", style="bold")
        if summary is None:
            text.append("no race yet", style="dim")
        else:
            text.append(f"{summary.count} question{'s' if summary.count != 1 else ''}\n")
            text.append(f"p50 speed-up {summary.p50:.1f}×", style="bold green")
        return text

    def _question_list(self) -> Text:
        text = Text()
        for i, question in enumerate(DEMO_QUESTIONS[:8]):
            text.append(f"{i + 1} ", style="bold")
            text.append(f"{question}   ")
        text.append(f"\n{HELP}", style="dim")
        return text

    def message(self, text: str, error: bool = False) -> None:
        self.query_one("#race-message", Static).update(Text(text, style="bold red" if error else "italic"))

    # --- actions --------------------------------------------------------------------------------------------

    def action_ask_builtin(self, index: int) -> None:
        self.next_question = index + 1
        self.ask(DEMO_QUESTIONS[index])

    def action_ask_next(self) -> None:
        self.action_ask_builtin(self.next_question % len(DEMO_QUESTIONS))

    def action_type_question(self) -> None:
        self.query_one("#race-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        question = event.value.strip()
        event.input.value = ""
        self.set_focus(None)
        if question:
            self.ask(question)

    def action_play_batch(self) -> None:
        if self.running:
            self.notify("wait for the race to finish", severity="warning")
        elif self.race is None or not self.race.play_batch():
            self.notify("no batch answer yet: race a question first", severity="warning")
        else:
            self.notify("playing the batch answer (same words, it just started later)")

    def action_save(self) -> None:
        """The screen as SVG (for slides), and PNG next to it when rsvg-convert is installed."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        svg = Path(self.app.save_screenshot(f"voicecli-race-{stamp}.svg", str(self.out_dir)))
        saved = [svg]
        png = svg_to_png(svg)
        if png is not None:
            saved.append(png)
        self.saved = saved
        self.notify("saved " + " and ".join(str(p) for p in saved), timeout=4)

    async def action_back(self) -> None:
        if self.running and self.race is not None:
            await self.race.interrupt()
            self.notify("race stopped")
            return
        focused = self.focused
        if isinstance(focused, Input):
            self.set_focus(None)
            return
        self.dismiss(None)


def svg_to_png(svg: Path) -> Path | None:
    """PNG beside the SVG through rsvg-convert (as scripts/screenshot.py makes the chat's), None without it."""
    if shutil.which("rsvg-convert") is None:
        return None
    png = svg.with_suffix(".png")
    done = subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], capture_output=True, timeout=60, check=False)
    return png if done.returncode == 0 and png.is_file() else None


class RaceApp(App[int]):
    """`voicecli demo`: the race screen on its own session (the chat's start-up path, without the chat)."""

    TITLE = "voicecli demo"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(self, config: Config, mute: bool = False, question: str | None = None,
                 out_dir: Path | None = None) -> None:
        super().__init__()
        self.config = config
        self.mute = mute
        self.first_question = question
        self.session: Session | None = None
        self.listener: object | None = None
        self.race_screen = RaceScreen(config, out_dir)

    def on_mount(self) -> None:
        self.push_screen(self.race_screen, callback=lambda _: self.exit(0))
        self.run_worker(self._start(), group="startup", exclusive=True)

    async def _start(self) -> None:
        from voicecli.converse.session import STARTUP_ERRORS, start_session

        screen = self.race_screen
        try:
            started = await start_session(self.config, mute=self.mute, out=None, progress=self.progress,
                                          wanted=lambda: self.is_running)
        except STARTUP_ERRORS as exc:
            if self.is_running:
                screen.failed_to_start(f"could not start: {exc}")
            return
        if started is None:  # quit while the session was opening: start_session closed it
            return
        self.session, audio_note = started
        screen.attach(self.session, audio_note)
        await self._listen()
        if self.first_question:
            screen.ask(self.first_question)

    def progress(self, message: str) -> None:
        if self.is_running:  # start-up goes on for a moment after a quit, with no screen left to show it
            self.race_screen.message(message)

    def on_listen_event(self, event: ListenEvent) -> None:
        if self.is_running:  # shutting down: the listener may outlive the widgets by a moment
            self.race_screen.on_listen(event)

    async def _listen(self) -> None:
        """Spoken questions when there is a microphone (typing and the built-in list work without one)."""
        from voicecli.listen.listener import VoiceOff, open_gated_listener

        screen = self.race_screen
        sink = self.session.pipeline.sink if self.session is not None else None
        listener = await open_gated_listener(self.config, self.on_listen_event, lambda: screen.running, sink)
        if not self.is_running or isinstance(listener, VoiceOff):  # the demo is asked by keys without one
            return
        for note in listener.notes:
            self.notify(note, timeout=10)
        self.listener = listener
        self.run_worker(listener.run(), group="listener", exclusive=True)

    async def action_quit(self) -> None:
        await self.close_session()
        self.exit(0)

    async def on_unmount(self) -> None:
        """However the demo ends, the race stops and the session's connection and local endpoint are closed."""
        await self.close_session()

    async def close_session(self) -> None:
        if self.race_screen.race is not None and self.race_screen.running:
            await self.race_screen.race.interrupt()
        if self.session is not None:
            await self.session.aclose()
            self.session = None
