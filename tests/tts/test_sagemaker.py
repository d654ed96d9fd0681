"""The SageMaker transports with the REAL boto3 and HTTP/2 SDK clients, through local SageMaker stand-ins, to the
real Kokoro endpoint: real synthesized audio end to end, compared byte for byte with what the endpoint returns
directly. Only the AWS wire is stood in for (tests/standins/sagemaker.py, tests/standins/sagemaker_bidi.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import miniaudio
import pytest

from tests.conftest import RunningServer
from tests.standins.sagemaker import PART_SIZES, Behaviour, SageMakerRuntimeStandIn
from tests.standins.sagemaker_bidi import BidiBehaviour, BidiStandIn
from tests.standins.tls import SelfSigned, make_self_signed
from tests.tts.events import audio_by_request, collect
from tests.tts.hostile import HostileEndpoint, HostileHttp, Session
from voicecli.audio.mp3_frames import frame_length
from voicecli.tts.base import (
    AUDIO_TOO_LONG,
    MAX_REQUEST_AUDIO_S,
    AudioChunk,
    AudioDone,
    AudioEvent,
    AudioFailed,
    AudioStart,
    SpeechRequest,
    TransportError,
)
from voicecli.tts.sagemaker import (
    SageMakerBatchTransport,
    SageMakerBidiTransport,
    SageMakerStreamTransport,
    SageMakerTarget,
)
from voicecli.tts.websocket import WebSocketTransport
from voicecli.wire.protocol import SAMPLE_RATE

SECRET = "standin-secret-key"
TEXT = "Hello from SageMaker."
SENTENCES = ["One.", "Two, three.", "Four five six."]
LONG = " ".join(["This sentence is here to keep the synthesizer busy for a while."] * 4)
TIMEOUT = 180.0


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SelfSigned]:
    """Dummy credentials, no AWS config files or instance metadata, and trust in the bidi stand-in's certificate."""
    tls = make_self_signed(tmp_path_factory.mktemp("tls"))
    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
                     "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"):
            env.delenv(name, raising=False)
        env.setenv("AWS_ACCESS_KEY_ID", "AKIDSTANDIN000000000")
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        env.setenv("AWS_DEFAULT_REGION", "us-east-1")
        env.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        env.setenv("SSL_CERT_FILE", str(tls.cert))
        yield tls


@pytest.fixture(scope="module")
def runtime(server: RunningServer, aws: SelfSigned) -> Iterator[SageMakerRuntimeStandIn]:
    endpoints = {"kokoro": Behaviour(), "faulty": Behaviour(stream_fault_after_parts=4),
                 "throttled": Behaviour(throttle=True)}
    with SageMakerRuntimeStandIn(server.http_url, endpoints) as standin:
        yield standin


@pytest.fixture(scope="module")
def bidi(server: RunningServer, aws: SelfSigned) -> Iterator[BidiStandIn]:
    endpoints = {"kokoro": BidiBehaviour(),
                 "refusing": BidiBehaviour(reject=(400, "InputValidationError", "Endpoint does not support bidi."))}
    with BidiStandIn(server.http_url, aws, endpoints=endpoints, secret_key=SECRET) as standin:
        yield standin


def target(name: str, url: str) -> SageMakerTarget:
    return SageMakerTarget(name, region="us-east-1", endpoint_url=url, max_attempts=1)


def direct(server: RunningServer, text: str, audio_format: str, stream: bool = False) -> bytes:
    body = {"text": text, "format": audio_format, "stream": stream}
    response = httpx.post(f"{server.http_url}/invocations", json=body, timeout=TIMEOUT)
    response.raise_for_status()
    return response.content


def mp3_seconds(data: bytes) -> float:
    decoded = miniaudio.decode(data, output_format=miniaudio.SampleFormat.SIGNED16, nchannels=1,
                               sample_rate=SAMPLE_RATE)
    return float(decoded.num_frames) / SAMPLE_RATE


def whole_frames(data: bytes) -> bool:
    position = 0
    while position < len(data):
        position += frame_length(data[position : position + 4])
    return position == len(data)


# ---------------------------------------------------------------------------------------------------- fast


async def test_no_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, aws: SelfSigned) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for transport in (SageMakerBatchTransport(target("kokoro", "http://127.0.0.1:9")),
                      SageMakerBidiTransport(target("kokoro", "https://127.0.0.1:9"))):
        with pytest.raises(TransportError, match=r"no AWS credentials.*aws configure"):
            await transport.connect()


async def test_unknown_profile_is_a_clear_error(aws: SelfSigned) -> None:
    transport = SageMakerStreamTransport(SageMakerTarget("kokoro", profile="nobody-has-this", region="us-east-1"))
    with pytest.raises(TransportError, match="profile 'nobody-has-this' is not configured"):
        await transport.connect()


# ---------------------------------------------------------------------------------------------------- batch / stream
# Everything below synthesizes real speech on the session's endpoint.


@pytest.mark.slow
async def test_batch_returns_the_endpoints_exact_mp3(server: RunningServer, runtime: SageMakerRuntimeStandIn) -> None:
    transport = SageMakerBatchTransport(target("kokoro", runtime.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("b1", TEXT))
        events = await collect(transport, {"b1"})
    finally:
        await transport.aclose()
    assert isinstance(events[0], AudioStart) and isinstance(events[-1], AudioDone)
    audio = audio_by_request(events)["b1"]
    assert audio == direct(server, TEXT, "mp3")
    assert 0.6 < mp3_seconds(audio) < 4.0
    record = runtime.records[-1]
    assert record.operation == "invocations" and json.loads(record.body)["stream"] is False
    assert record.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDSTANDIN000000000/")


@pytest.mark.slow
async def test_response_stream_realigns_parts_cut_mid_frame(server: RunningServer,
                                                            runtime: SageMakerRuntimeStandIn) -> None:
    transport = SageMakerStreamTransport(target("kokoro", runtime.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("s1", TEXT))
        await transport.send(SpeechRequest("s2", "Second.", format="pcm16"))
        events = await collect(transport, {"s1", "s2"})
    finally:
        await transport.aclose()
    assert [e.request_id for e in events if isinstance(e, AudioDone)] == ["s1", "s2"]
    chunks = [e.data for e in events if isinstance(e, AudioChunk) and e.request_id == "s1"]
    assert all(chunk[:1] == b"\xff" and whole_frames(chunk) for chunk in chunks)
    audio = audio_by_request(events)
    assert audio["s1"] == direct(server, TEXT, "mp3", stream=True)
    assert audio["s2"] == direct(server, "Second.", "pcm16", stream=True)
    assert all(len(e.data) % 2 == 0 for e in events if isinstance(e, AudioChunk) and e.request_id == "s2")
    mp3_record = next(r for r in reversed(runtime.records) if json.loads(r.body)["text"] == TEXT)
    assert mp3_record.operation == "invocations-response-stream"
    assert mp3_record.parts > len(chunks)  # the stand-in really cut frames apart (sizes cycle through PART_SIZES)
    assert min(PART_SIZES) == 1


@pytest.mark.slow
async def test_model_stream_error_after_200_fails_that_request_only(runtime: SageMakerRuntimeStandIn) -> None:
    faulty = SageMakerStreamTransport(target("faulty", runtime.url))
    await faulty.connect()
    try:
        await faulty.send(SpeechRequest("f1", TEXT))
        events = await collect(faulty, {"f1"})
        failed = events[-1]
        assert isinstance(failed, AudioFailed) and failed.code == "model_stream_error"
        assert "CloudWatch" in failed.message and "stand-in fault" in failed.message
        assert isinstance(events[0], AudioStart)  # the fault came after HTTP 200
        runtime.endpoints["faulty"] = Behaviour()  # the container recovers: the session goes on
        await faulty.send(SpeechRequest("f2", "Recovered."))
        assert isinstance((await collect(faulty, {"f2"}))[-1], AudioDone)
    finally:
        runtime.endpoints["faulty"] = Behaviour(stream_fault_after_parts=4)
        await faulty.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("transport_class", [SageMakerBatchTransport, SageMakerStreamTransport])
async def test_container_rejection_surfaces_as_model_error(
    transport_class: type[SageMakerBatchTransport], runtime: SageMakerRuntimeStandIn
) -> None:
    transport = transport_class(target("kokoro", runtime.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("bad", "Hello.", voice="xx_nobody"))
        (event,) = await collect(transport, {"bad"})
    finally:
        await transport.aclose()
    assert isinstance(event, AudioFailed) and event.code == "model_error"
    assert "unknown voice" in event.message and "400" in event.message


@pytest.mark.slow
async def test_unknown_endpoint_name_is_clear_and_final(runtime: SageMakerRuntimeStandIn) -> None:
    transport = SageMakerStreamTransport(target("no-such-endpoint", runtime.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("x", "Hello."))
        (event,) = await collect(transport, {"x"})
        assert isinstance(event, AudioFailed) and event.code == "endpoint_not_found"
        assert "'no-such-endpoint' was not found" in event.message and "region" in event.message
        with pytest.raises(TransportError, match="not found"):
            await transport.send(SpeechRequest("y", "Again."))
    finally:
        await transport.aclose()


@pytest.mark.slow
async def test_throttling_is_reported_after_the_configured_attempts(runtime: SageMakerRuntimeStandIn) -> None:
    before = len(runtime.records)
    transport = SageMakerBatchTransport(target("throttled", runtime.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("t", "Hello."))
        (event,) = await collect(transport, {"t"})
    finally:
        await transport.aclose()
    assert isinstance(event, AudioFailed) and event.code == "throttled"
    assert len(runtime.records) - before == 1  # max_attempts=1: exactly one call


# ---------------------------------------------------------------------------------------------------- bidi


@pytest.mark.slow
async def test_bidi_one_stream_pipelines_two_turns_and_matches_the_websocket(
    server: RunningServer, bidi: BidiStandIn
) -> None:
    reference = WebSocketTransport(server.http_url)
    await reference.connect()
    ids = [f"w{i}" for i in range(3)]
    for rid, text in zip(ids, SENTENCES, strict=True):
        await reference.send(SpeechRequest(rid, text))
    expected = list(audio_by_request(await collect(reference, set(ids))).values())
    await reference.aclose()

    before = len(bidi.records)
    transport = SageMakerBidiTransport(target("kokoro", bidi.url))
    await transport.connect()
    try:
        for turn in range(2):
            ids = [f"t{turn}-{i}" for i in range(3)]
            for rid, text in zip(ids, SENTENCES, strict=True):
                await transport.send(SpeechRequest(rid, text))  # all three sent before any audio is read
            events = await collect(transport, set(ids))
            assert [e.request_id for e in events if isinstance(e, AudioStart)] == ids
            assert [e.request_id for e in events if isinstance(e, AudioDone)] == ids
            order = [ids.index(str(e.request_id)) for e in events]
            assert order == sorted(order)  # never interleaved
            audio = audio_by_request(events)
            assert [audio[rid] for rid in ids] == expected  # byte for byte what the WebSocket gives
        assert 0.2 < mp3_seconds(audio[ids[2]]) < 4.0
    finally:
        await transport.aclose()
    assert transport.streams_opened == 1
    (record,) = bidi.records[before:]
    assert record.status == 200 and record.violations == []
    assert record.signatures_verified == record.envelopes >= 7  # 6 requests + close + the final empty envelope
    assert record.final_envelope and record.container_closed
    assert [json.loads(data).get("type") for _, data in record.parts_in] == ["synthesize"] * 6 + ["close"]
    assert {data_type for data_type, _ in record.parts_in} <= {None, "BINARY"}  # binary frames, like SageMaker


@pytest.mark.slow
async def test_bidi_cancel_on_the_same_stream_keeps_the_session(bidi: BidiStandIn) -> None:
    before = len(bidi.records)
    transport = SageMakerBidiTransport(target("kokoro", bidi.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("a", LONG))
        await transport.send(SpeechRequest("b", LONG))
        first = await transport.next_event(TIMEOUT)
        assert isinstance(first, AudioStart) and first.request_id == "a"
        await transport.cancel(None)
        assert transport.outstanding == []
        await transport.send(SpeechRequest("c", "Still here."))
        events = await collect(transport, {"c"})
        assert [e.request_id for e in events if isinstance(e, AudioDone)] == ["c"]
        assert not any(e.request_id in ("a", "b") and not isinstance(e, AudioChunk) for e in events)
    finally:
        await transport.aclose()
    (record,) = bidi.records[before:]
    types = [json.loads(data).get("type") for _, data in record.parts_in]
    assert types == ["synthesize", "synthesize", "cancel", "synthesize", "close"]


@pytest.mark.slow
async def test_bidi_close_lets_the_container_finish_first(bidi: BidiStandIn) -> None:
    """Closing right after sending must not tear the session down: the audio still arrives, then the stream ends."""
    transport = SageMakerBidiTransport(target("kokoro", bidi.url))
    await transport.connect()
    await transport.send(SpeechRequest("last", "Goodbye."))
    await transport.aclose()
    events: list[AudioEvent] = []
    with pytest.raises(TimeoutError):
        while True:  # everything aclose() let arrive is already queued
            events.append(await transport.next_event(0.2))
    assert isinstance(events[-1], AudioDone) and events[-1].request_id == "last"
    assert any(isinstance(e, AudioChunk) for e in events)


@pytest.mark.slow
async def test_bidi_model_stream_error_fails_outstanding_then_a_new_stream_serves(bidi: BidiStandIn) -> None:
    bidi.endpoints["flaky"] = BidiBehaviour(model_stream_error_after_parts=1)
    transport = SageMakerBidiTransport(target("flaky", bidi.url))
    await transport.connect()
    try:
        await transport.send(SpeechRequest("m1", TEXT))
        events = await collect(transport, {"m1"})
        failed = events[-1]
        assert isinstance(failed, AudioFailed) and failed.code == "model_stream_error"
        assert "stand-in fault" in failed.message
        bidi.endpoints["flaky"] = BidiBehaviour()
        await transport.send(SpeechRequest("m2", "Recovered."))
        assert isinstance((await collect(transport, {"m2"}))[-1], AudioDone)
        assert transport.streams_opened == 2
    finally:
        await transport.aclose()


@pytest.mark.slow
async def test_bidi_input_validation_error_at_open(bidi: BidiStandIn) -> None:
    transport = SageMakerBidiTransport(target("refusing", bidi.url))
    with pytest.raises(TransportError, match="Endpoint does not support bidi"):
        await transport.connect()
    await transport.aclose()


@pytest.mark.slow
async def test_bidi_unknown_endpoint_name_is_clear(bidi: BidiStandIn) -> None:
    transport = SageMakerBidiTransport(target("no-such-endpoint", bidi.url))
    with pytest.raises(TransportError, match=r"'no-such-endpoint'.*not found.*list-endpoints"):
        await transport.connect()
    await transport.aclose()



async def test_bidi_a_container_that_drops_every_session_gets_a_bounded_number_of_new_streams(aws: SelfSigned) -> None:
    """The reconnect and its budget are the WebSocket transport's (receiver.Reconnects): a container that accepts each
    session and drops it at once used to get new streams without end, each successful open resetting the budget."""
    async def script(session: Session) -> None:
        if session.index == 0:
            await session.request()  # the first session drops at the first request, every later one at once

    async with HostileEndpoint(script) as container:
        with BidiStandIn(container.http_url, aws, secret_key=SECRET) as standin:
            transport = SageMakerBidiTransport(target("kokoro", standin.url), reconnect_base_delay_s=0.01)
            async with transport:
                await transport.send(SpeechRequest("x", TEXT))
                events = await collect(transport, {"x"}, 30)
    (failed,) = events
    assert isinstance(failed, AudioFailed) and failed.code == "connection_lost"
    assert "the SageMaker endpoint 'kokoro' accepted the connection and dropped it again, 3 times" in failed.message
    assert transport.streams_opened == 4 and len(standin.records) == 4


@pytest.mark.parametrize("transport_class", [SageMakerBatchTransport, SageMakerStreamTransport])
async def test_an_answer_past_the_limit_fails_that_request_and_the_next_one_is_served(
    transport_class: type[SageMakerBatchTransport], aws: SelfSigned
) -> None:
    """A container that never stops sending: its audio used to be read (batch) or passed on (stream) without end."""
    with HostileHttp(2 * MAX_REQUEST_AUDIO_S) as container, SageMakerRuntimeStandIn(container.url) as standin:
        async with transport_class(target("kokoro", standin.url)) as transport:
            await transport.send(SpeechRequest("endless", TEXT))
            await transport.send(SpeechRequest("next", TEXT))
            events = await collect(transport, {"endless", "next"}, 60)
    assert [(e.request_id, e.code) for e in events if isinstance(e, AudioFailed)] == [("endless", AUDIO_TOO_LONG)]
    heard = sum(len(e.data) for e in events if isinstance(e, AudioChunk) and e.request_id == "endless")
    assert heard <= MAX_REQUEST_AUDIO_S * 8000  # 64 kbps
    assert [e.request_id for e in events if isinstance(e, AudioDone)] == ["next"]
