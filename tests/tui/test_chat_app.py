"""The terminal app driven with Textual's Pilot: every binding, every trouble message, and a real typed turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from textual.widgets import Input, Static

from tests.conftest import RunningServer
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.config import Config
from voicecli.tui.chat_app import HelpScreen, VoiceChatApp
from voicecli.tui.widgets import AnswerText, ConversationView, LatencyPanel, StatusBar

SIZE = (100, 30)


def make_config(tmp_path: Path, **env: str) -> Config:
    base = {"VOICECLI_LATENCY__LOG_PATH": str(tmp_path / "sessions.jsonl")}
    return Config.load(env={**base, **env})


def conversation_text(app: VoiceChatApp) -> str:
    return "\n".join(str(w.render()) for w in app.query_one(ConversationView).query(Static))


async def wait_for(condition: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


@pytest.fixture
def live_config(tmp_path: Path, server: RunningServer, models_dir: Path) -> Config:
    return make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=server.http_url, VOICECLI_MODELS__DIR=str(models_dir))


@pytest.mark.slow
async def test_typed_turn_against_the_real_endpoint(live_config: Config, tmp_path: Path) -> None:
    app = VoiceChatApp(live_config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusBar)
        await wait_for(lambda: status.state == "idle")
        assert status.connection == "warm"
        await pilot.click("#prompt")
        await pilot.press(*"Say hello in one short sentence.", "enter")
        await wait_for(lambda: app.stats.percentiles("time to first audio") is not None)
        await wait_for(lambda: status.state == "idle")
        text = conversation_text(app)
        assert "Say hello in one short sentence." in text
        answer = app.query_one(AnswerText)
        assert "".join(answer.tokens).strip() and not answer.cut
        panel = str(app.query_one(LatencyPanel).render())
        assert "first audio byte" in panel and "first audio decoded" in panel  # muted: nothing plays
        timeline = app.query_one(LatencyPanel).timeline
        assert timeline is not None and timeline.ordered()
        assert {"llm_first_token", "first_audio_byte", "turn_done"} <= set(timeline.marks)
        await pilot.press("f3")  # batch mode: the next turn is one request
        assert status.mode == "batch" and app.session is not None and app.session.pipeline.settings.mode == "batch"
        await pilot.press(*"And goodbye.", "enter")
        await wait_for(lambda: len(app.stats.modes) == 2)
        assert "batch" in str(app.query_one(LatencyPanel).render())
        await pilot.press("ctrl+q")
    assert (tmp_path / "sessions.jsonl").read_text().count("\n") == 2


@pytest.mark.slow
@pytest.mark.usefixtures("dummy_aws_credentials")
async def test_escape_interrupts_an_answer(tmp_path: Path, server: RunningServer, bedrock: BedrockStandIn) -> None:
    """A Bedrock stand-in holds the answer after two sentences, so the turn is certainly still speaking."""
    never = threading.Event()
    bedrock.queue(standin.Reply(deltas=["One, two.", " Three, four.", " Five."], hold_at=2, release=never,
                                hold_timeout_s=120))
    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=server.http_url, VOICECLI_LLM__BACKEND="bedrock",
                         VOICECLI_LLM__BEDROCK__ENDPOINT_URL=bedrock.url)
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusBar)
        await wait_for(lambda: status.state == "idle")
        await pilot.press(*"Count please.", "enter")
        await wait_for(lambda: status.state == "speaking")
        await pilot.press("escape")
        await wait_for(lambda: status.state == "idle")
        never.set()
        assert app.query_one(AnswerText).cut
        assert "interrupted" in str(app.query_one(AnswerText).render())


async def test_events_that_arrive_during_shutdown_are_dropped_and_the_session_is_closed(
        tmp_path: Path, server: RunningServer) -> None:
    """The listener and the pipeline call the app from their own tasks: one that lands after the screens are gone
    (the listener is cancelled only after them) must not fail the app, and the session is closed however the app
    ends, not only by Ctrl+Q."""
    from voicecli.converse.pipeline import AssistantDelta
    from voicecli.listen.listener import InputLevel

    def active_sessions() -> int:
        return int(httpx.get(f"{server.http_url}/stats", timeout=10).json()["active_sessions"])

    app = VoiceChatApp(make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=server.http_url), mute=True)
    async with app.run_test(size=SIZE):
        await wait_for(lambda: app.query_one(StatusBar).state == "idle")
        during = active_sessions()
        assert during >= 1
    assert app.session is None and app.taker is None
    await wait_for(lambda: active_sessions() < during, 10)  # the app's WebSocket session has ended at the server
    app.on_listen_event(InputLevel(db=-40.0, gated=False))
    app.on_pipeline_event(AssistantDelta(turn_id=1, text="late"))
    app.progress("late progress")


async def test_bindings_that_need_no_endpoint(tmp_path: Path) -> None:
    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET="ws://127.0.0.1:9",
                         VOICECLI_ENDPOINT__CONNECT_TIMEOUT_S="2")
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusBar)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f3")
        assert status.mode == "batch"
        await pilot.press("f3")
        assert status.mode == "bidi"
        await pilot.press("f5")
        assert status.voice == "af_jessica"
        await pilot.press("f4", "f4")
        assert status.voice == "af_bella"
        await pilot.press("f2")
        assert status.input_mode == "push_to_talk"
        await pilot.press("f6")
        await pilot.pause()
        assert any("no microphone" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert not list(app.query_one(ConversationView).query(Static))
        await pilot.press("escape")  # nothing to interrupt: no error
        await pilot.press("ctrl+q")
    assert app.return_code == 0


async def test_the_latency_panel_draws_each_mark_the_pipeline_pushes(tmp_path: Path) -> None:
    """The waterfall follows the marks as they are pushed (each carries its turn's timeline): nothing is pulled from
    the pipeline, so it needs no session at all."""
    from voicecli.converse.timeline import TurnTimeline

    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET="ws://127.0.0.1:9",
                         VOICECLI_ENDPOINT__CONNECT_TIMEOUT_S="2")
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.query_one(StatusBar).state == "error", 30)
        assert app.session is None
        panel = app.query_one(LatencyPanel)
        timeline = TurnTimeline(7, "bidi", "typed", listener=app.on_pipeline_event)
        timeline.mark("llm_request")
        timeline.mark("first_audio_byte", timeline.marks["llm_request"] + 0.25)
        await pilot.pause()
        assert panel.timeline is timeline
        assert "turn 7" in str(panel.render()) and "first audio byte" in str(panel.render())


async def test_unreachable_endpoint_offers_the_local_one(tmp_path: Path) -> None:
    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET="ws://127.0.0.1:9",
                         VOICECLI_ENDPOINT__CONNECT_TIMEOUT_S="2")
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: app.query_one(StatusBar).state == "error", 30)
        text = conversation_text(app)
        assert "could not start" in text and "--endpoint local" in text and "voicecli serve" in text
        assert "Traceback" not in text
        await pilot.press(*"hello", "enter")  # typing before a session exists is answered, not crashed
        await pilot.pause()
        assert any("still starting" in str(n.message) for n in app._notifications)


async def test_missing_local_model_names_the_install_command(tmp_path: Path, server: RunningServer) -> None:
    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=server.http_url,
                         VOICECLI_MODELS__DIR=str(tmp_path / "no-models"))
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE):
        await wait_for(lambda: app.query_one(StatusBar).state == "error", 60)
        assert "voicecli models install --only smollm2" in conversation_text(app)


async def test_bedrock_without_credentials_says_how_to_configure(
    tmp_path: Path, server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET=server.http_url, VOICECLI_LLM__BACKEND="bedrock")
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusBar)
        await wait_for(lambda: status.state in ("idle", "error"), 60)
        if status.state == "idle":  # credentials are only looked up when the first request is signed
            await pilot.press(*"hi", "enter")
            await wait_for(lambda: "aws configure" in conversation_text(app), 60)
        assert "aws configure" in conversation_text(app)


def test_input_line_is_focused_at_start(tmp_path: Path) -> None:
    async def run() -> None:
        app = VoiceChatApp(make_config(tmp_path, VOICECLI_ENDPOINT__TARGET="ws://127.0.0.1:9",
                                       VOICECLI_ENDPOINT__CONNECT_TIMEOUT_S="1"), mute=True)
        async with app.run_test(size=(80, 24)):
            assert isinstance(app.focused, Input)
            assert app.screen.has_class("-narrow")

    asyncio.run(run())


@pytest.mark.slow
async def test_a_spoken_draft_thinks_ahead_quietly_then_shows_once_confirmed(live_config: Config) -> None:
    """The speculation state: "thinking ahead" while a draft is answered on hold (nothing in the conversation, no
    state flicker), then the question, its answer and the waterfall's speculation line once the turn is confirmed."""
    import time

    from voicecli.listen.listener import SpokenDraft, SpokenTurn

    app = VoiceChatApp(live_config, mute=True)
    async with app.run_test(size=SIZE):
        status = app.query_one(StatusBar)
        await wait_for(lambda: status.state == "idle")
        assert app.taker is not None
        question = "What is the capital of France?"
        now = time.monotonic()
        app.taker.on_listen(SpokenDraft(question, {"speech_end": now, "transcript_ready": now}, 1))
        await wait_for(lambda: status.state == "thinking ahead")
        seen = set()
        for _ in range(20):  # a second of holding: the state stays put and nothing is shown
            seen.add(status.state)
            await asyncio.sleep(0.05)
        assert seen == {"thinking ahead"} and question not in conversation_text(app)
        app.taker.on_listen(SpokenTurn(question, {"speech_end": now, "turn_confirmed": time.monotonic()}, 2.0, 1))
        await wait_for(lambda: app.stats.percentiles("LLM total") is not None)
        await wait_for(lambda: status.state == "idle")
        assert conversation_text(app).count(question) == 1
        assert "thought ahead 1×: 1 used, 0 dropped" in str(app.query_one(LatencyPanel).render())


async def test_the_words_so_far_show_until_the_turn_starts(tmp_path: Path) -> None:
    """A PartialTranscript (a draft decoded at a dip in the speech) shows in the status bar; the turn that starts
    clears it (its text is in the conversation then); a long one shows its newest words."""
    from voicecli.converse.pipeline import TurnStarted
    from voicecli.listen.listener import PartialTranscript

    config = make_config(tmp_path, VOICECLI_ENDPOINT__TARGET="ws://127.0.0.1:9",
                         VOICECLI_ENDPOINT__CONNECT_TIMEOUT_S="2")
    app = VoiceChatApp(config, mute=True)
    async with app.run_test(size=SIZE) as pilot:
        status = app.query_one(StatusBar)
        app.on_listen_event(PartialTranscript("What is the capital", 1, 1.0))
        await pilot.pause()
        assert "heard: What is the capital" in status.render().plain
        long = "Tell me, slowly and with every detail you know, about the longest river in South America"
        app.on_listen_event(PartialTranscript(long, 2, 2.0))
        await pilot.pause()
        shown = status.render().plain
        assert "heard: …" in shown and shown.endswith("river in South America") and "Tell me" not in shown
        app.on_pipeline_event(TurnStarted(1, long, "spoken", "bidi"))
        await pilot.pause()
        assert status.hearing == "" and "heard:" not in status.render().plain
        await pilot.press("ctrl+q")
