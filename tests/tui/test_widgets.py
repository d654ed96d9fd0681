"""The latency panel's waterfall says "played" only when a speaker plays the answers; an answer captions the word
being spoken and, after a barge-in, shows what was not heard dimmed and struck through."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.content import Content
from textual.style import Style

from voicecli.converse.heard import HeardCut, HeardWords
from voicecli.converse.timeline import SessionStats, TurnTimeline
from voicecli.tui.widgets import AnswerText, ConversationView, LatencyPanel


class PanelApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LatencyPanel(SessionStats())


def turn() -> TurnTimeline:
    timeline = TurnTimeline(1, "bidi", "typed")
    for at, mark in enumerate(["llm_request", "llm_first_token", "first_audio_byte", "first_audio_played"]):
        timeline.mark(mark, 10.0 + at / 10)
    return timeline


async def test_a_speaker_plays_the_first_audio() -> None:
    async with PanelApp().run_test() as pilot:
        panel = pilot.app.query_one(LatencyPanel)
        panel.show_turn(turn())
        shown = str(panel.render())
        assert "first audio played" in shown and "first audio decoded" not in shown


async def test_without_a_speaker_the_stage_is_not_called_played() -> None:
    async with PanelApp().run_test() as pilot:
        panel = pilot.app.query_one(LatencyPanel)
        panel.show_turn(turn())
        panel.audible = False  # muted, --out, or no audio device: the sink keeps the audio
        await pilot.pause()
        shown = str(panel.render())
        assert "first audio decoded" in shown and "played" not in shown
        row = next(line for line in shown.splitlines() if line.startswith("first audio decoded"))
        assert row.split()[3] == "300"  # ms after the request, as before: only the label says what it is
        panel.show_turn(TurnTimeline(2, "bidi", "typed"))  # a turn that has not got there yet
        assert "first audio decoded" in str(panel.render())


async def test_told_before_it_is_mounted() -> None:
    class SilentApp(App[None]):
        def compose(self) -> ComposeResult:
            panel = LatencyPanel(SessionStats())
            panel.audible = False
            yield panel

    async with SilentApp().run_test() as pilot:
        panel = pilot.app.query_one(LatencyPanel)
        panel.show_turn(turn())
        assert "first audio decoded" in str(panel.render())


class ConversationApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ConversationView()


def styled(answer: AnswerText, **style: bool) -> str:
    """The text of the answer's spans that carry every one of `style`'s attributes."""
    content = answer.render()
    assert isinstance(content, Content)
    plain = content.plain
    return "".join(plain[span.start: span.end] for span in content.spans
                   if isinstance(span.style, Style) and all(getattr(span.style, k) == v for k, v in style.items()))


async def test_the_caption_highlights_the_word_being_spoken() -> None:
    async with ConversationApp().run_test() as pilot:
        view = pilot.app.query_one(ConversationView)
        view.start_answer(1)
        await pilot.pause()
        answer = view.answer(1)
        assert answer is not None
        answer.add_tokens("The **Moon** is far. It has no air, no water.")
        answer.add_sentence(0, "The Moon is far.")
        answer.add_sentence(1, "It has no air, no water.")
        answer.caption(0, 1)  # markdown between the words is passed over
        assert styled(answer, underline=True) == "Moon"
        answer.caption(1, 4)  # the second "no": each word is looked for after the one before
        assert styled(answer, underline=True) == "no" and styled(answer, reverse=True) == "It has no air, no water."
        content = answer.render()
        assert isinstance(content, Content)
        underlined = next(span for span in content.spans if isinstance(span.style, Style) and span.style.underline)
        assert content.plain[underlined.start:] == "no water."


async def test_after_a_barge_in_the_unheard_rest_is_dimmed_and_struck_through() -> None:
    async with ConversationApp().run_test() as pilot:
        view = pilot.app.query_one(ConversationView)
        view.start_answer(1)
        await pilot.pause()
        answer = view.answer(1)
        assert answer is not None
        answer.add_tokens("The Moon is far. It has no air. People walked on it.")
        for index, sentence in enumerate(["The Moon is far.", "It has no air.", "People walked on it."]):
            answer.add_sentence(index, sentence)
        answer.caption(1, 1)
        heard = HeardWords(2, 4, "It has", "timings")
        answer.finish(True, HeardCut(2.0, 1, 0.4, heard, 4, "The Moon is far. It has"))
        assert styled(answer, dim=True, strike=True) == " no air. People walked on it."
        assert "✂ interrupted" in str(answer.render()) and not styled(answer, underline=True)
        nothing = HeardCut(0.0, None, 0.0, None, 0, "")
        answer.finish(True, nothing)
        assert styled(answer, dim=True, strike=True) == "The Moon is far. It has no air. People walked on it."
        answer.finish(False)
        assert not styled(answer, dim=True)
