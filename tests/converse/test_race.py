"""The race: its parts that need no endpoint (the tally, the replay's timing, the speed-up read from the marks), and
a whole race over the SageMaker transports (the real AWS clients on the loopback stand-ins, the real endpoint behind
them), where the network share is shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunningServer
from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from tests.standins.sagemaker import Behaviour, SageMakerRuntimeStandIn
from tests.standins.sagemaker_bidi import BidiBehaviour, BidiStandIn
from tests.standins.tls import make_self_signed
from voicecli.config import Config
from voicecli.converse.pipeline import PipelineSettings
from voicecli.converse.race import (
    Race,
    RaceTally,
    RecordedAnswer,
    RecordingLLM,
    ReplayLLM,
    live_speedup,
    network_share_ms,
    speedup,
)
from voicecli.converse.timeline import SentenceMarks, TurnTimeline
from voicecli.llm.base import StreamEnd, StreamEvent, TextDelta
from voicecli.llm.bedrock import BedrockLLM
from voicecli.playback.sinks import CollectingSink
from voicecli.tts.base import TTSTransport
from voicecli.tts.sagemaker import SageMakerBatchTransport, SageMakerBidiTransport, SageMakerTarget

ANSWER = RecordedAnswer(((0.05, "The sky"), (0.10, " is blue."), (0.20, " Light"), (0.30, " scatters.")), "end_turn")
EARLY_S = 0.002
"""asyncio's clock may wake a sleeper this much early; a replayed delta must never come earlier than that."""
LATE_S = 0.25
"""Generous: a loaded 2-core machine may run the loop late; what matters is order and never early."""


async def replay_offsets(llm: ReplayLLM, on_delta: object = None) -> tuple[list[tuple[float, str]], StreamEnd]:
    """Replay through a RecordingLLM: the recorder measures each delta as the pipeline would receive it."""
    recorder = RecordingLLM(llm)  # type: ignore[arg-type]
    end: StreamEnd | None = None
    stream = recorder.stream([], system="", max_tokens=1, temperature=0.0)
    async with contextlib.aclosing(stream) as events:
        event: StreamEvent
        async for event in events:
            if isinstance(event, TextDelta) and callable(on_delta):
                on_delta(event)
            elif isinstance(event, StreamEnd):
                end = event
    assert end is not None
    return recorder.deltas, end


async def test_a_replay_speaks_the_same_words_at_the_recorded_times() -> None:
    deltas, end = await replay_offsets(ReplayLLM(ANSWER))
    assert [text for _, text in deltas] == [text for _, text in ANSWER.deltas]
    assert end.stop_reason == "end_turn"
    for (got, _), (want, _) in zip(deltas, ANSWER.deltas, strict=True):
        assert want - EARLY_S <= got <= want + LATE_S
    assert "".join(t for _, t in deltas) == ANSWER.text


async def test_a_paused_replay_holds_its_words_and_shifts_the_rest() -> None:
    """As the embedded LLM does while the first sentence is synthesized: nothing comes while paused, and what
    follows keeps its spacing, shifted by the time held."""
    replay = ReplayLLM(ANSWER, pausable=True)
    hold_s = 0.2
    resumed_at: list[float] = []
    loop = asyncio.get_running_loop()

    def on_delta(event: TextDelta) -> None:
        if event.text == " is blue.":  # the pipeline pauses right after handing over the first sentence
            replay.pause()
            loop.call_later(hold_s, lambda: (resumed_at.append(loop.time()), replay.resume()))

    deltas, _ = await replay_offsets(replay, on_delta)
    offsets = {text: at for at, text in deltas}
    assert resumed_at, "resume was never called"
    assert offsets[" Light"] >= 0.10 + hold_s - EARLY_S  # held: not at its recorded 0.20 s
    # the rest is shifted too, not bunched up behind it (measured from its own recorded time: the spacing after a
    # late " Light" would shrink on a loaded machine, as it did in CI, 96.3 ms for 100)
    assert offsets[" scatters."] >= 0.30 + hold_s - EARLY_S
    assert offsets[" scatters."] <= 0.30 + hold_s + LATE_S


async def test_a_replay_of_a_remote_llm_ignores_pauses_and_a_pause_never_outlasts_its_limit() -> None:
    remote = ReplayLLM(ANSWER, pausable=False)
    remote.pause()
    deltas, _ = await replay_offsets(remote)
    assert deltas[-1][0] <= 0.30 + LATE_S

    forgotten = ReplayLLM(ANSWER, pausable=True)

    def pause_briefly(event: TextDelta) -> None:
        if event.text == "The sky":
            forgotten.pause(max_s=0.1)  # and nobody resumes it

    deltas, _ = await replay_offsets(forgotten, pause_briefly)
    assert 0.30 + 0.1 - EARLY_S <= deltas[-1][0] <= 0.30 + 0.1 + LATE_S


def test_the_tally_keeps_count_and_the_median() -> None:
    tally = RaceTally()
    assert tally.summary() is None and tally.count == 0
    for value in (3.0, 1.5, 4.5):
        tally.add(value)
    summary = tally.summary()
    assert summary is not None and tally.count == summary.count == 3
    assert summary.p50 == pytest.approx(3.0)
    tally.add(2.0)
    assert tally.summary() is not None and tally.summary().p50 == pytest.approx(2.5)  # type: ignore[union-attr]


def timeline(mode: str, first_audio_s: float | None, start: float = 100.0) -> TurnTimeline:
    made = TurnTimeline(1, mode, "typed")
    made.mark("llm_request", start)
    if first_audio_s is not None:
        made.mark("first_audio_played", start + first_audio_s)
    return made


def test_the_speedup_is_batch_first_audio_over_bidi_first_audio_each_from_its_own_request() -> None:
    batch, bidi = timeline("batch", 6.0, start=10.0), timeline("bidi", 1.5, start=50.0)
    assert speedup(batch, bidi) == pytest.approx(4.0)
    assert speedup(batch, timeline("bidi", None)) is None
    assert live_speedup(batch, bidi).value == pytest.approx(4.0) and live_speedup(batch, bidi).bound == ""


def test_the_live_speedup_is_an_upper_bound_while_bidi_is_silent() -> None:
    batch = timeline("batch", 6.0)
    assert live_speedup(None, None).value is None
    assert live_speedup(timeline("batch", None), None).value is None  # batch has not spoken: nothing known yet
    bidi = timeline("bidi", None, start=200.0)
    waiting = live_speedup(batch, bidi, now=202.0)
    assert waiting.bound == "≤" and waiting.value == pytest.approx(3.0)
    assert live_speedup(batch, bidi, now=203.0).value == pytest.approx(2.0)  # it shrinks as bidi waits
    assert live_speedup(batch, bidi, now=207.0).value is None  # slower than batch: no claim


def test_the_network_share_needs_the_endpoints_own_time() -> None:
    made = timeline("bidi", 1.0)
    assert network_share_ms(made) is None
    made.sentences.append(SentenceMarks(0, "Hi.", sent=100.2, first_byte=100.7))
    assert network_share_ms(made) is None  # the transport reported no server timing (SageMaker InvokeEndpoint)
    made.sentences[0].server_first_audio_ms = 420.0
    wait, network = network_share_ms(made)  # type: ignore[misc]
    assert wait == pytest.approx(500.0) and network == pytest.approx(80.0)


SECRET = "standin-secret"
"""The secret key dummy_aws_credentials sets: the bidi stand-in verifies the SDK's chunk signatures with it."""


@pytest.fixture
def sagemaker(server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              dummy_aws_credentials: None) -> Iterator[dict[str, TTSTransport]]:
    """SageMaker's two ways in, each on its stand-in in front of the real endpoint: the bidirectional stream (bidi)
    and InvokeEndpoint (batch), as `--endpoint sagemaker` uses them."""
    tls = make_self_signed(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(tls.cert))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with SageMakerRuntimeStandIn(server.http_url, {"kokoro": Behaviour()}) as runtime, \
            BidiStandIn(server.http_url, tls, endpoints={"kokoro": BidiBehaviour()}, secret_key=SECRET) as bidi:
        yield {"bidi": SageMakerBidiTransport(SageMakerTarget("kokoro", "us-east-1", endpoint_url=bidi.url,
                                                              max_attempts=1)),
               "batch": SageMakerBatchTransport(SageMakerTarget("kokoro", "us-east-1", endpoint_url=runtime.url,
                                                                max_attempts=1))}


@pytest.mark.slow
async def test_a_race_over_sagemaker_shows_the_network_share_where_the_transport_reports_it(
        sagemaker: dict[str, TTSTransport], bedrock: BedrockStandIn) -> None:
    bedrock.queue(standin.Reply(deltas=["The sky is blue", " because air scatters blue light.",
                                        " Sunsets are red", " for the same reason."], delay_s=0.05))
    llm = BedrockLLM(dataclasses.replace(Config.defaults().llm.bedrock, endpoint_url=bedrock.url))
    output = CollectingSink()
    for transport in sagemaker.values():
        await transport.connect()
    try:
        race = Race(llm, sagemaker, output, PipelineSettings(first_fragment_words=0, first_phrase_words=0))
        result = await race.run("Why is the sky blue?")
    finally:
        for transport in sagemaker.values():
            await transport.aclose()
        await llm.aclose()
    assert result.completed, result.failure
    batch, bidi = result.timelines["batch"], result.timelines["bidi"]
    assert [s.text for s in bidi.sentences] == ["The sky is blue because air scatters blue light.",
                                                "Sunsets are red for the same reason."]
    assert result.speedup == speedup(batch, bidi) and race.tally.count == 1
    share = network_share_ms(bidi)  # the bidirectional stream relays the endpoint's own timings
    assert share is not None and 0 <= share[1] <= share[0]
    assert network_share_ms(batch) is None  # InvokeEndpoint returns the audio alone
    assert output.first_played(f"race-1-turn-{bidi.turn_id}") is not None
    assert output.first_played(f"race-1-turn-{batch.turn_id}") is None
