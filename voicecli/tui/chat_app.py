"""`voicecli chat`: the terminal app.

The app owns no pipeline logic: it opens a session (voicecli.converse.session), turns typed lines (and, with a
microphone, spoken turns) into pipeline turns, and renders the pipeline's typed events: tokens streaming in, the
sentence being spoken, every latency mark as it happens. Trouble at start-up or mid-turn becomes a message in the
conversation that says what to do, never a traceback.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Static

from voicecli.config import Config
from voicecli.converse.pipeline import (
    AssistantDelta,
    PipelineEvent,
    SentenceAudio,
    SentenceQueued,
    SpeculationState,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    WordSpoken,
)
from voicecli.converse.session import STARTUP_ERRORS, Session, llm_label, start_session
from voicecli.converse.timeline import LatencyLog, Mark, SessionStats
from voicecli.converse.turn_taking import TurnTaker
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.voices import cycle
from voicecli.tui.demo_app import RaceScreen
from voicecli.tui.widgets import ConversationView, LatencyPanel, StatusBar

if TYPE_CHECKING:
    from voicecli.listen.listener import Listener, ListenEvent

HELP = """\
[b]voicecli[/b]: type (or speak) and hear the answer start after its first sentence.

[b]Enter[/b]     send the typed message (interrupts an answer in progress)
[b]F6[/b]        push-to-talk: start / stop recording (push-to-talk mode)
[b]F2[/b]        switch turn taking: voice activity detection / push-to-talk
[b]F3[/b]        switch bidi (sentence by sentence) / batch (whole answer)
[b]F4 / F5[/b]   previous / next voice
[b]F7[/b]        demo: race one question through batch and bidi, side by side
[b]Esc[/b]       interrupt the answer (stops audio, cancels generation)
[b]Ctrl+L[/b]    clear the conversation and its history
[b]F1[/b]        this help          [b]Ctrl+Q[/b]  quit

The latency panel shows the current turn as a waterfall (ms from the end of your input) and the session's
p50 / p95 per mode: switch modes with F3 to compare bidi with batch.

Press Esc or F1 to close."""


class HelpScreen(ModalScreen[None]):
    """Key bindings, one screen."""

    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        yield Static(HELP, id="help")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class VoiceChatApp(App[int]):
    """The chat screen: status bar, conversation, latency panel, input line, footer."""

    CSS_PATH = "chat_app.tcss"
    TITLE = "voicecli"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("f6", "push_to_talk", "Talk"),
        Binding("f2", "toggle_input_mode", "VAD/PTT"),
        Binding("f3", "toggle_mode", "Bidi/Batch"),
        Binding("f4", "voice(-1)", "Voice-"),
        Binding("f5", "voice(1)", "Voice+"),
        Binding("f7", "demo", "Race"),
        Binding("escape", "interrupt", "Interrupt"),
        Binding("ctrl+l", "clear", "Clear"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, config: Config, mute: bool = False) -> None:
        super().__init__()
        self.config = config
        self.mute = mute
        self.session: Session | None = None
        self.stats = SessionStats(config.latency.window_turns)
        self.log_file = LatencyLog(config.latency_log_path)
        self.listener: Listener | None = None
        self.taker: TurnTaker | None = None
        self.audio_note = ""

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Container(id="body"):
            yield ConversationView(id="conversation")
            yield LatencyPanel(self.stats, id="latency")
        yield Input(placeholder="Type a message and press Enter (F1: help)", id="prompt")
        yield Footer()

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def conversation(self) -> ConversationView:
        return self.query_one(ConversationView)

    @property
    def latency(self) -> LatencyPanel:
        return self.query_one(LatencyPanel)

    def on_mount(self) -> None:
        status = self.status
        status.mode = self.config.tts.mode
        status.voice = self.config.tts.voice
        status.speed = self.config.tts.speed
        status.llm = llm_label(self.config)
        status.input_mode = self.config.audio.input_mode
        status.endpoint = self.config.endpoint.target
        self.conversation.border_title = "conversation"
        self.query_one(Input).focus()
        self.start_session()

    # --- start-up -------------------------------------------------------------------------------------------

    @work(exclusive=True, group="startup")
    async def start_session(self) -> None:
        self.conversation.notice("starting")
        try:
            started = await start_session(self.config, mute=self.mute, out=None, progress=self.progress,
                                          on_event=self.on_pipeline_event, wanted=lambda: self.is_running)
        except STARTUP_ERRORS as exc:
            if not self.is_running:  # quit while starting: nobody is left to read why
                return
            self.status.state = "error"
            self.status.connection = "unreachable"
            advice = ""
            if self.config.endpoint.target != "local":
                advice = " To run the endpoint on this machine instead, start with --endpoint local."
            self.conversation.notice(f"could not start: {exc}.{advice}", error=True)
            return
        if started is None:  # quit while the session was opening: start_session closed it
            return
        self.session, self.audio_note = started
        self.latency.audible = not isinstance(self.session.pipeline.sink, CollectingSink)
        self.conversation.notice(f"audio: {self.audio_note}")
        self.taker = TurnTaker(self.session.pipeline, self.config.audio.speculative_answers)
        self.taker.start()
        self.status.endpoint = self.session.endpoint_label
        self.status.connection = "warm"
        self.status.state = "idle"
        await self.start_listening()
        if not self.is_running:
            return
        self.conversation.notice("ready: " + ("speak, or " if self.listener is not None else "")
                                 + "type a message and press Enter")
        self.notify("ready", timeout=2)

    async def start_listening(self) -> None:
        """The microphone is optional: without one the app says so and typing still works."""
        from voicecli.listen.listener import VoiceOff, open_gated_listener

        assert self.session is not None
        pipeline = self.session.pipeline
        listener = await open_gated_listener(self.config, self.on_listen_event, lambda: pipeline.speaking,
                                             pipeline.sink)
        if not self.is_running:  # quit meanwhile: the microphone opens only when the listener runs, so never
            return
        if isinstance(listener, VoiceOff):
            self.conversation.notice(listener.reason, error=listener.error)
            return
        for note in listener.notes:
            self.conversation.notice(note)
        self.listener = listener
        self.status.mic_level_db = -120.0
        self.run_worker(self.listener.run(), group="listener", exclusive=True)

    def on_listen_event(self, event: ListenEvent) -> None:
        from voicecli.listen.listener import HeardNothing, InputLevel, PartialTranscript

        if not self.is_running:  # shutting down: the widgets may be gone while the listener is not yet cancelled
            return
        if isinstance(self.screen, RaceScreen):  # the race screen takes spoken questions while it is open
            self.screen.on_listen(event)
        elif self.taker is not None:
            self.taker.on_listen(event)
        if isinstance(event, InputLevel):
            self.status.mic_level_db = event.db
        elif isinstance(event, HeardNothing):
            self.notify("heard nothing I could transcribe", timeout=2)
        elif isinstance(event, PartialTranscript):  # the words so far, shown until the turn starts
            self.status.hearing = event.text

    def progress(self, message: str) -> None:
        if not self.is_running:
            return
        self.status.connection = message[:40]
        self.conversation.notice(message)

    # --- turns ----------------------------------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        if self.session is None or self.taker is None:
            self.notify("still starting up: wait for 'ready'", severity="warning")
            return
        if self.session.pipeline.speaking:
            await self.taker.interrupt()  # a typed message takes the floor, as speech does
        self.taker.submit(text)

    def on_pipeline_event(self, event: PipelineEvent) -> None:
        if not self.is_running:  # an answer still finishing while the app shuts down has nowhere to be shown
            return
        conversation = self.conversation
        if isinstance(event, SpeculationState):
            # Thinking ahead: the answer to what was heard so far is being prepared, unheard until the turn ends.
            self.status.state = {"started": "thinking ahead", "confirmed": "thinking"}.get(event.state, "idle")
        elif isinstance(event, TurnStarted):
            self.status.hearing = ""  # the turn's own text takes over
            conversation.add_user(event.user_text, event.origin)
            conversation.start_answer(event.turn_id)
            self.status.state = "thinking"
        elif isinstance(event, AssistantDelta):
            answer = conversation.answer(event.turn_id)
            if answer is not None:
                answer.add_tokens(event.text)
                conversation.scroll_end(animate=False)
        elif isinstance(event, SentenceQueued):
            answer = conversation.answer(event.turn_id)
            if answer is not None:
                answer.add_sentence(event.index, event.text)
        elif isinstance(event, SentenceAudio):
            answer = conversation.answer(event.turn_id)
            if answer is not None:
                answer.speak(event.index)
            self.status.state = "speaking"
        elif isinstance(event, WordSpoken):
            answer = conversation.answer(event.turn_id)
            if answer is not None:
                answer.caption(event.index, event.word)
        elif isinstance(event, Mark):
            self.latency.show_turn(event.timeline)
        elif isinstance(event, TurnFailed):
            conversation.notice(event.message, error=True)
        elif isinstance(event, TurnFinished):
            answer = conversation.answer(event.turn_id)
            if answer is not None:
                answer.finish(event.interrupted, event.cut)
            self.stats.add(event.timeline)
            with contextlib.suppress(OSError):
                self.log_file.append(event.timeline)
            self.latency.show_turn(event.timeline)
            self.status.state = "idle"

    # --- actions --------------------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_demo(self) -> None:
        """The race screen over this session (its LLM, transports and speaker); the chat waits meanwhile."""
        if self.session is None or self.taker is None:
            self.notify("still starting up: wait for 'ready'", severity="warning")
            return
        if isinstance(self.screen, RaceScreen):
            return
        await self.taker.interrupt()  # the race uses the session's transports: nothing else may meanwhile
        screen = RaceScreen(self.config)
        await self.push_screen(screen)
        screen.attach(self.session, self.audio_note)

    async def action_interrupt(self) -> None:
        if self.taker is not None and self.session is not None and self.session.pipeline.speaking:
            await self.taker.interrupt()
            self.notify("interrupted")

    def action_toggle_mode(self) -> None:
        mode = "batch" if self.status.mode == "bidi" else "bidi"
        self.status.mode = mode
        if self.session is not None:
            self.session.pipeline.settings.mode = mode
        self.notify(f"{mode}: " + ("each sentence is spoken as soon as it is written" if mode == "bidi"
                                   else "the whole answer is synthesized, then spoken"))

    def action_voice(self, step: int) -> None:
        voice = cycle(self.status.voice, step)
        self.status.voice = voice
        if self.session is not None:
            self.session.pipeline.settings.voice = voice
        self.notify(f"voice: {voice}", timeout=2)

    def action_toggle_input_mode(self) -> None:
        from voicecli.listen.listener import make_detector

        self.status.input_mode = "push_to_talk" if self.status.input_mode == "vad" else "vad"
        if self.listener is not None:
            detector = make_detector(self.status.input_mode, self.config.audio)
            self.listener.use_detector(detector)
        self.notify(f"turn taking: {self.status.input_mode.replace('_', '-')}")

    def action_push_to_talk(self) -> None:
        """F6 starts recording, F6 again ends the turn (terminals report no key release)."""
        from voicecli.listen.endpointing import PushToTalk

        if self.listener is None:
            self.notify("no microphone: voice input is off, typing still works", severity="warning")
        elif not isinstance(self.listener.detector, PushToTalk):
            self.notify("voice activity detection is on: just speak (F2 switches to push-to-talk)")
        elif self.listener.detector.pressed:
            self.listener.release()
            self.status.state = "thinking"
        else:
            if self.taker is not None and self.session is not None and self.session.pipeline.speaking:
                self.run_worker(self.taker.interrupt(), group="interrupt")
            self.listener.press()
            self.status.state = "listening"

    def action_clear(self) -> None:
        self.conversation.remove_children()
        if self.session is not None:
            self.session.pipeline.history.clear()

    async def action_quit(self) -> None:
        await self.close_session()
        self.exit(0)

    async def on_unmount(self) -> None:
        """However the app ends (Ctrl+Q, a signal, a test's pilot), the answer stops and the session's connection
        and local endpoint are closed."""
        await self.close_session()

    async def close_session(self) -> None:
        if self.taker is not None:
            await self.taker.interrupt()
            await self.taker.aclose()
            self.taker = None
        if self.session is not None:
            await self.session.aclose()
            self.session = None
