"""The latency panel's waterfall says "played" only when a speaker plays the answers."""

from __future__ import annotations

from textual.app import App, ComposeResult

from voicecli.converse.timeline import SessionStats, TurnTimeline
from voicecli.tui.widgets import LatencyPanel


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
