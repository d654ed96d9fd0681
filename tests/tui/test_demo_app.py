"""The race screen driven with Textual's Pilot against the real endpoint and the real local LLM: a whole race, no
audio device, a dropped endpoint, and the chat's F7.

Set VOICECLI_WRITE_DOCS=1 to also write the README's picture (docs/demo.png) from the end-to-end race.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from textual.widgets import Digits, Static

from tests.conftest import REPO, RunningServer
from tests.standins.tcp_proxy import CuttableProxy
from tests.tui.test_chat_app import make_config, wait_for
from voicecli.config import Config
from voicecli.converse.race import DEMO_QUESTIONS, LANES
from voicecli.listen.listener import SpokenTurn
from voicecli.playback.sinks import CollectingSink
from voicecli.tui.chat_app import VoiceChatApp
from voicecli.tui.demo_app import RaceApp, RaceBars, RaceScreen
from voicecli.tui.widgets import StatusBar

pytestmark = pytest.mark.slow

SIZE = (120, 36)
SHORT = {"VOICECLI_LLM__MAX_TOKENS": "40", "VOICECLI_LLM__TEMPERATURE": "0"}
"""Short greedy answers: a race costs two syntheses of the whole answer on the shared CPU."""


def race_config(tmp_path: Path, endpoint: str, models_dir: Path, **env: str) -> Config:
    return make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=endpoint, VOICECLI_MODELS__DIR=str(models_dir),
                       **SHORT, **env)


def screen_text(screen: RaceScreen) -> str:
    return "\n".join(str(w.render()) for w in screen.query(Static))


def ms(marks: dict[str, float], start: str, end: str) -> float:
    return (marks[end] - marks[start]) * 1000


async def test_a_demo_question_races_both_paths_and_plays_only_bidi(tmp_path: Path, server: RunningServer,
                                                                    models_dir: Path) -> None:
    app = RaceApp(race_config(tmp_path, server.http_url, models_dir), mute=True, out_dir=tmp_path / "slides")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.race_screen
        await wait_for(lambda: screen.race is not None, 120)
        assert "NO AUDIO: muted" in screen_text(screen)
        await pilot.press("1")
        await wait_for(lambda: screen.result is not None and not screen.running, 300)
        result = screen.result
        assert result is not None and result.question == DEMO_QUESTIONS[0]
        assert result.failure is None and result.completed, result.failure
        batch, bidi = result.timelines["batch"], result.timelines["bidi"]
        for timeline in (batch, bidi):  # both timelines completed, in causal order
            assert {"llm_request", "llm_first_token", "tts_first_request_sent", "first_audio_byte",
                    "first_audio_played", "llm_done", "turn_done"} <= set(timeline.marks)
            assert timeline.ordered() and not timeline.interrupted
        assert (batch.mode, bidi.mode) == ("batch", "bidi")
        assert len(batch.sentences) == 1  # the same words, one request vs sentence by sentence
        assert " ".join(s.text for s in bidi.sentences).split() == batch.sentences[0].text.split()
        # the speed-up shown is the one the marks give
        expected = (ms(batch.marks, "llm_request", "first_audio_played")
                    / ms(bidi.marks, "llm_request", "first_audio_played"))
        await pilot.pause()
        assert screen.query_one("#speedup", Digits).value == f"{expected:.1f}x"
        assert f"{expected:.1f}×" in str(screen.query_one("#speedup-caption", Static).render())
        assert "p50 speed-up" in str(screen.query_one("#race-tally", Static).render())
        assert screen.race is not None and screen.race.tally.speedups == [pytest.approx(expected)]
        # only the bidi answer reached the output; the batch one was kept, not played
        assert app.session is not None
        output = app.session.pipeline.sink
        assert isinstance(output, CollectingSink)
        bidi_id, batch_id = f"race-1-turn-{bidi.turn_id}", f"race-1-turn-{batch.turn_id}"
        assert output.first_played(bidi_id) is not None
        assert output.first_played(batch_id) is None and output.first_played(f"turn-{batch.turn_id}") is None
        played = output.audio().size
        kept = screen.race.batch_audio
        assert kept is not None and kept.audio().size > 0 and played > 0
        bars = str(screen.query_one(RaceBars).render())
        assert all(lane.upper() in bars for lane in LANES) and "first audio" in bars
        # s: the race as SVG (and PNG when rsvg-convert is installed) for slides
        await pilot.press("s")
        await pilot.pause()
        svg = next((tmp_path / "slides").glob("voicecli-race-*.svg"))
        assert "BATCH" in svg.read_text() and "BIDI" in svg.read_text()
        pngs = list((tmp_path / "slides").glob("voicecli-race-*.png"))
        assert bool(pngs) == (shutil.which("rsvg-convert") is not None)
        if pngs and os.environ.get("VOICECLI_WRITE_DOCS") == "1":
            shutil.copyfile(pngs[0], REPO / "docs" / "demo.png")
        # b plays the batch answer, on request only
        await pilot.press("b")
        await pilot.pause()
        assert output.audio().size > played
        await pilot.press("ctrl+q")


async def test_without_an_audio_device_the_race_shows_text_and_bars(tmp_path: Path, server: RunningServer,
                                                                     models_dir: Path) -> None:
    config = race_config(tmp_path, server.http_url, models_dir, VOICECLI_AUDIO__OUTPUT_DEVICE="no-such-speaker")
    app = RaceApp(config, mute=False, question="Name one planet.")
    async with app.run_test(size=SIZE) as pilot:
        screen = app.race_screen
        await wait_for(lambda: screen.race is not None, 120)
        status = str(screen.query_one("#race-status", Static).render())
        assert "NO AUDIO: no audio output" in status and "text and bars only" in status
        await wait_for(lambda: screen.result is not None and not screen.running, 300)
        assert screen.result is not None and screen.result.completed, screen.result.failure
        assert screen.query_one("#speedup", Digits).value.endswith("x")
        await pilot.press("ctrl+q")


async def test_a_dropped_endpoint_gets_a_clear_message_and_the_next_question_works(
        tmp_path: Path, server: RunningServer, models_dir: Path) -> None:
    proxy = await CuttableProxy(server.port).start()
    try:
        app = RaceApp(race_config(tmp_path, proxy.url, models_dir), mute=True)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.race_screen
            await wait_for(lambda: screen.race is not None, 120)
            proxy.refuse = True  # the endpoint goes away: live connections cut, new ones refused
            proxy.cut()
            await pilot.press("2")
            await wait_for(lambda: screen.result is not None and not screen.running, 300)
            failed = screen.result
            assert failed is not None and failed.failure is not None and not failed.completed
            message = str(screen.query_one("#race-message", Static).render())
            assert "the batch path failed" in message and "ask again" in message and "voicecli doctor" in message
            assert "Traceback" not in screen_text(screen)
            assert screen.race is not None and screen.race.tally.count == 0
            proxy.refuse = False  # back: the next question reconnects
            await pilot.press("3")
            await wait_for(lambda: screen.result is not failed and not screen.running, 300)
            assert screen.result is not None and screen.result.completed, screen.result.failure
            assert screen.race.tally.count == 1
            await pilot.press("ctrl+q")
    finally:
        await proxy.stop()


async def test_f7_races_a_spoken_question_over_the_chat_session_and_esc_returns(
        tmp_path: Path, server: RunningServer, models_dir: Path) -> None:
    app = VoiceChatApp(race_config(tmp_path, server.http_url, models_dir), mute=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.query_one(StatusBar).state == "idle", 120)
        await pilot.press("f7")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RaceScreen) and screen.race is not None
        assert app.session is not None and screen.race.transports is app.session.transports
        # what the microphone hears goes to the race, not to the chat behind it
        app.on_listen_event(SpokenTurn("Name one planet.", {}, 1.0, 1))
        await wait_for(lambda: screen.result is not None and not screen.running, 300)
        assert screen.result is not None and screen.result.completed, screen.result.failure
        assert {t.origin for t in screen.result.timelines.values()} == {"spoken"}
        assert app.session.pipeline.history.messages() == []  # the chat answered nothing
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RaceScreen)
        await pilot.press("ctrl+q")
