"""Small widgets, each named for what it shows."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from voicecli.converse.heard import HeardCut
from voicecli.converse.timeline import SessionStats, TurnTimeline

WATERFALL: tuple[tuple[str, str], ...] = (
    ("speech_end", "speech end"),
    ("transcript_ready", "transcript"),
    ("turn_confirmed", "turn confirmed"),
    ("llm_first_token", "first token"),
    ("first_sentence_ready", "first sentence"),
    ("first_audio_byte", "first audio byte"),
    ("first_audio_played", "first audio played"),
    ("llm_done", "LLM done"),
    ("turn_done", "done"),
)
"""The stages of the live waterfall, in the order a bidi turn passes them (a speculative answer passes
"turn confirmed" later, anywhere before "first audio played": only playback waits for it)."""
UNHEARD = {"first_audio_played": "first audio decoded"}
"""The stages whose label would claim a sound when nothing plays (muted, --out, no audio device): the sink then keeps
the audio, and its "first audio played" is the moment the first decoded audio reached it."""
_LABEL_WIDTH = max(len(label) for label in [*dict(WATERFALL).values(), *UNHEARD.values()])

STATE_ICONS = {"starting": "…", "listening": "●", "thinking": "◐", "thinking ahead": "◔", "speaking": "♪", "idle": "○",
               "error": "✗"}


HEARING_CHARS = 48
"""The words so far the status bar shows (their end: the newest words)."""


class StatusBar(Static):
    """Endpoint and connection, mode, voice, LLM, microphone level, and what the assistant is doing."""

    endpoint: reactive[str] = reactive("")
    connection: reactive[str] = reactive("connecting")
    mode: reactive[str] = reactive("bidi")
    voice: reactive[str] = reactive("af_heart")
    speed: reactive[float] = reactive(1.0)
    llm: reactive[str] = reactive("")
    input_mode: reactive[str] = reactive("vad")
    mic_level_db: reactive[float | None] = reactive(None)
    state: reactive[str] = reactive("starting")
    hearing: reactive[str] = reactive("")
    """The user's words so far, before their turn is confirmed (a PartialTranscript); "" once it starts."""

    def render(self) -> Text:
        meter = "mic off" if self.mic_level_db is None else "mic " + _meter(self.mic_level_db)
        text = Text()
        text.append(f"{STATE_ICONS.get(self.state, '?')} {self.state:14}", style="bold")
        text.append(f" │ {self.mode.upper()} │ {self.voice} ×{self.speed:g} │ {self.llm} │ {self.input_mode} {meter}")
        text.append(f" │ TTS {self.endpoint} [{self.connection}]")
        if self.hearing:
            shown = self.hearing if len(self.hearing) <= HEARING_CHARS else "…" + self.hearing[-HEARING_CHARS + 1:]
            text.append(f" │ heard: {shown}", style="italic")
        return text


def _meter(db: float, width: int = 8) -> str:
    filled = max(0, min(width, round((db + 60) / 60 * width)))
    return "▮" * filled + "▯" * (width - filled)


class ConversationView(VerticalScroll):
    """User and assistant turns; the assistant's text streams in, the sentence being spoken is highlighted."""

    def add_user(self, text: str, origin: str) -> None:
        line = Text()
        line.append("you ", style="bold")
        line.append(("🎤 " if origin == "spoken" else "") + text)
        self._add(Static(line, classes="user"))

    def start_answer(self, turn_id: int) -> None:
        self._add(AnswerText(turn_id, id=f"answer-{turn_id}", classes="assistant"))

    def answer(self, turn_id: int) -> AnswerText | None:
        found = self.query(f"#answer-{turn_id}")
        return found.first(AnswerText) if found else None

    def notice(self, text: str, error: bool = False) -> None:
        self._add(Static(Text(text), classes="error" if error else "notice"))

    def _add(self, widget: Static) -> None:
        self.mount(widget)
        self.scroll_end(animate=False)


SPEAKING_STYLE = "reverse"
"""The sentence being spoken."""
CAPTION_STYLE = "reverse bold underline"
"""The word being spoken, inside it (the caption, from the endpoint's word times)."""
UNHEARD_STYLE = "dim strike"
"""What an interruption kept the listener from hearing: generated, never said, not in the history."""


def word_span(raw: str, start: int, words: list[str], index: int) -> tuple[int, int] | None:
    """Where word `index` of `words` (a sentence's words, in order) is in `raw` from `start`: each word looked for
    after the one before, so the markdown the raw text may carry between them is passed over. None when one is not
    found (the speakable text rewrote it)."""
    at = start
    for word in words[: index + 1]:
        found = raw.find(word, at)
        if found < 0:
            return None
        at = found + len(word)
    return at - len(words[index]), at


class AnswerText(Static):
    """An assistant answer: raw tokens as they stream, sentences as they are spoken (the current one highlighted, and
    in it the word being spoken), and after an interruption what was not heard, dimmed and struck through."""

    def __init__(self, turn_id: int, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.turn_id = turn_id
        self.tokens: list[str] = []
        self.sentences: list[str] = []
        self.speaking: int | None = None
        self.word: int | None = None
        """The word being spoken in the sentence being spoken (None: not known)."""
        self.cut = False
        self.heard: HeardCut | None = None
        """Where an interruption cut the answer (None: not interrupted, or not known)."""

    def add_tokens(self, delta: str) -> None:
        self.tokens.append(delta)
        self._redraw()

    def add_sentence(self, index: int, text: str) -> None:
        while len(self.sentences) <= index:
            self.sentences.append("")
        self.sentences[index] = text

    def speak(self, index: int) -> None:
        if index != self.speaking:
            self.word = None
        self.speaking = index
        self._redraw()

    def caption(self, index: int, word: int) -> None:
        """Word `word` of sentence `index` is being spoken."""
        self.speaking, self.word = index, word
        self._redraw()

    def finish(self, interrupted: bool, heard: HeardCut | None = None) -> None:
        self.cut = interrupted
        self.heard = heard if interrupted else None
        self.speaking = None if not interrupted else self.speaking
        self.word = None
        self._redraw()

    def _sentence_at(self, raw: str, index: int) -> tuple[int, int] | None:
        """Where sentence `index` is in the raw text, markdown and all: the sentences' words looked for one after
        another from the start (None: one was not found, the speakable text rewrote it)."""
        at = 0
        span = None
        for sentence in self.sentences[: index + 1]:
            words = sentence.split()
            first = word_span(raw, at, words, 0) if words else None
            last = word_span(raw, at, words, len(words) - 1) if words else None
            if first is None or last is None:
                return None
            span, at = (first[0], last[1]), last[1]
        return span

    def _heard_end(self, raw: str) -> int | None:
        """Where in the raw text what was heard ends (None: not known)."""
        heard = self.heard
        if heard is None:
            return None
        if heard.sentence is None or heard.words is None:
            return 0
        if heard.sentence >= len(self.sentences):
            return None
        sentence = self._sentence_at(raw, heard.sentence)
        if sentence is None:
            return None
        if heard.words.count == 0:
            return sentence[0]
        span = word_span(raw, sentence[0], self.sentences[heard.sentence].split(), heard.words.count - 1)
        return None if span is None else span[1]

    def _redraw(self) -> None:
        text = Text()
        text.append("assistant ", style="bold")
        raw = "".join(self.tokens)
        heard_end = self._heard_end(raw) if self.cut else None
        if heard_end is not None:
            text.append(raw[:heard_end])
            text.append(raw[heard_end:], style=UNHEARD_STYLE)
        elif self.speaking is not None and self.speaking < len(self.sentences) and not self.cut:
            located = self._sentence_at(raw, self.speaking)
            if located is not None:
                at, end = located
                sentence = self.sentences[self.speaking]
                span = None if self.word is None else word_span(raw, at, sentence.split(), self.word)
                text.append(raw[:at])
                if span is not None and span[1] <= end:
                    text.append(raw[at: span[0]], style=SPEAKING_STYLE)
                    text.append(raw[span[0]: span[1]], style=CAPTION_STYLE)
                    text.append(raw[span[1]: end], style=SPEAKING_STYLE)
                else:
                    text.append(raw[at:end], style=SPEAKING_STYLE)
                text.append(raw[end:])
            else:
                text.append(raw)
        else:
            text.append(raw)
        if self.cut:
            text.append("  ✂ interrupted", style="bold red")
        self.update(text)


class LatencyPanel(Static):
    """The current turn as a live waterfall, and session p50/p95 of the key spans per mode."""

    audible: reactive[bool] = reactive(True)
    """Whether the answers' audio reaches a speaker. The app sets it once it knows its sink: the panel cannot tell
    a speaker from a sink that keeps the audio, and must not call a stage "played" when nothing was heard."""

    def __init__(self, stats: SessionStats, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.stats = stats
        self.timeline: TurnTimeline | None = None

    def watch_audible(self) -> None:
        if self.is_mounted:  # set before mounting, on_mount draws it
            self.refresh_view()

    def on_mount(self) -> None:
        self.border_title = "latency"
        self.refresh_view()

    def show_turn(self, timeline: TurnTimeline) -> None:
        self.timeline = timeline
        self.refresh_view()

    def refresh_view(self) -> None:
        text = Text()
        timeline = self.timeline
        if timeline is None:
            text.append("no turn yet: type or speak\n", style="dim")
        else:
            text.append(f"turn {timeline.turn_id} · {timeline.mode}\n", style="bold")
            ahead = timeline.speculations
            if ahead.started:
                text.append(f"thought ahead {ahead.started}×: {ahead.confirmed} used, {ahead.cancelled} dropped\n",
                            style="dim")
            relative = timeline.relative()
            horizon = max([*relative.values(), 1.0])
            width = max(6, (self.size.width or 34) - _LABEL_WIDTH - 8)
            for mark, label in WATERFALL:
                if not self.audible:
                    label = UNHEARD.get(mark, label)
                if mark not in relative:
                    text.append(f"{label:{_LABEL_WIDTH}} {'·':>6}\n", style="dim")
                    continue
                ms = relative[mark]
                bar = "█" * max(1, round(ms / horizon * width)) if ms > 0 else "▏"
                style = "bold green" if mark == "first_audio_played" else ""
                text.append(f"{label:{_LABEL_WIDTH}} {ms:6.0f} ", style=style)
                text.append(f"{bar}\n", style="green" if mark == "first_audio_played" else "cyan")
        text.append("\nsession p50 / p95 (ms)\n", style="bold")
        for mode in self.stats.modes or ["bidi"]:
            for label in ("time to first audio", "LLM time to first token", "sentence -> first audio byte"):
                value = self.stats.percentiles(label, mode)
                shown = f"{value.p50:6.0f}/{value.p95:<6.0f}" if value else "     -/-     "
                text.append(f"{mode:5} {_short(label):13} {shown}\n")
        counts = ", ".join(f"{mode} n={self.stats.count(mode)}" for mode in self.stats.modes)
        if counts:
            text.append(f"turns: {counts}\n", style="dim")
        self.update(text)


def _short(label: str) -> str:
    return {"time to first audio": "first audio", "LLM time to first token": "LLM 1st token",
            "sentence -> first audio byte": "TTS 1st byte"}.get(label, label)

