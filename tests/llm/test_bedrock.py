"""The Bedrock backend driven through the real boto3 client against the ConverseStream stand-in on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing

import pytest

from tests.standins import bedrock as standin
from tests.standins.bedrock import BedrockStandIn
from voicecli.config import Config, LlmBedrockSettings
from voicecli.llm import (
    ChatMessage,
    LLMAccessDenied,
    LLMError,
    LLMModelUnavailable,
    LLMStreamError,
    LLMThrottled,
    LLMUnavailable,
    StreamEnd,
    TextDelta,
)
from voicecli.llm.bedrock import BedrockLLM

# One loop for fixtures and tests: clients hold loop-bound connections across the fixture boundary.
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.usefixtures("dummy_aws_credentials")]

MODEL_ID = "us.amazon.nova-lite-v1:0"
QUESTION = [ChatMessage("user", "Hi there")]


def section(**changes: str) -> LlmBedrockSettings:
    """[llm.bedrock] as shipped (model MODEL_ID, region us-east-1), with `changes`: what BedrockLLM is given."""
    shipped = Config.defaults().llm.bedrock
    assert shipped.model_id == MODEL_ID and shipped.region == "us-east-1"
    return dataclasses.replace(shipped, **changes)


@pytest.fixture
def server() -> Iterator[BedrockStandIn]:
    with BedrockStandIn() as running:
        yield running


@pytest.fixture
async def llm(server: BedrockStandIn) -> AsyncIterator[BedrockLLM]:
    backend = BedrockLLM(section(endpoint_url=server.url))
    yield backend
    await backend.aclose()


async def collect(llm: BedrockLLM, messages: list[ChatMessage] = QUESTION) -> list[TextDelta | StreamEnd]:
    return [e async for e in llm.stream(messages, system="Be brief.", max_tokens=64, temperature=0.3)]


async def test_streams_deltas_then_end_with_usage(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.normal("Hello", " world", "."))
    events = await collect(llm)
    assert events == [TextDelta("Hello"), TextDelta(" world"), TextDelta("."), StreamEnd("end_turn", 11, 4)]


async def test_sends_model_system_messages_and_inference_config(llm: BedrockLLM, server: BedrockStandIn) -> None:
    history = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!"), ChatMessage("user", "Weather?")]
    await collect(llm, history)
    (request,) = server.requests
    assert request.model_id == MODEL_ID
    assert "%3A" in request.path  # boto3 escapes the ':' of the model id
    assert request.body["system"] == [{"text": "Be brief."}]
    assert request.body["messages"] == [
        {"role": "user", "content": [{"text": "Hi"}]},
        {"role": "assistant", "content": [{"text": "Hello!"}]},
        {"role": "user", "content": [{"text": "Weather?"}]},
    ]
    assert request.body["inferenceConfig"] == {"maxTokens": 64, "temperature": 0.3}
    assert "/us-east-1/bedrock/aws4_request" in request.headers["Authorization"]


async def test_consecutive_answers_reuse_one_connection(llm: BedrockLLM, server: BedrockStandIn) -> None:
    await collect(llm)
    await collect(llm)
    first, second = server.requests
    assert first.client_port == second.client_port


async def test_empty_system_prompt_is_omitted(llm: BedrockLLM, server: BedrockStandIn) -> None:
    _ = [e async for e in llm.stream(QUESTION, system="", max_tokens=8, temperature=0.0)]
    assert "system" not in server.requests[0].body


async def test_first_delta_arrives_before_the_last_is_sent(llm: BedrockLLM, server: BedrockStandIn) -> None:
    reply = standin.Reply(deltas=["One", " two", " three"], hold_at=2)
    server.queue(reply)
    received: list[str] = []
    async with aclosing(llm.stream(QUESTION, system="", max_tokens=64, temperature=0.0)) as events:
        async for item in events:
            if isinstance(item, TextDelta):
                if not received:
                    assert not server.requests[0].last_delta_sent.is_set()
                    reply.release.set()
                received.append(item.text)
    assert received == ["One", " two", " three"]


async def test_http_429_is_throttled_without_retrying(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.throttled_http(), standin.throttled_http())
    with pytest.raises(LLMThrottled, match="ThrottlingException") as caught:
        await collect(llm)
    assert "retry" in str(caught.value)
    assert len(server.requests) == 1


async def test_retry_count_is_configurable(server: BedrockStandIn) -> None:
    server.queue(standin.throttled_http(), standin.normal("ok"))
    backend = BedrockLLM(section(endpoint_url=server.url), max_attempts=2)
    try:
        events = await collect(backend)
    finally:
        await backend.aclose()
    assert events[0] == TextDelta("ok")
    assert len(server.requests) == 2


async def test_throttling_mid_stream_after_deltas(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.throttled_mid_stream(after=2))
    received: list[str] = []
    with pytest.raises(LLMThrottled, match="throttlingException"):
        async for item in llm.stream(QUESTION, system="", max_tokens=64, temperature=0.0):
            assert isinstance(item, TextDelta)
            received.append(item.text)
    assert received == ["Hello", " from"]


@pytest.mark.parametrize("exception_type", ["modelStreamErrorException", "internalServerException"])
async def test_stream_exceptions_are_stream_errors(
    llm: BedrockLLM, server: BedrockStandIn, exception_type: str
) -> None:
    server.queue(standin.stream_exception(exception_type, "the model fell over"))
    with pytest.raises(LLMStreamError, match=exception_type):
        await collect(llm)


async def test_connection_cut_mid_stream_is_a_stream_error(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.dropped_mid_stream(after=1))
    with pytest.raises(LLMStreamError, match="broke during the answer"):
        await collect(llm)


async def test_access_denied(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.access_denied())
    with pytest.raises(LLMAccessDenied, match="Model access"):
        await collect(llm)


@pytest.mark.parametrize(
    "reply",
    [
        standin.model_not_enabled(),
        standin.http_error(404, "ResourceNotFoundException", "Model not found."),
    ],
)
async def test_model_not_enabled_or_unknown(llm: BedrockLLM, server: BedrockStandIn, reply: standin.Reply) -> None:
    server.queue(reply)
    with pytest.raises(LLMModelUnavailable, match=r"llm\.bedrock\.model_id"):
        await collect(llm)


async def test_other_validation_errors_are_not_blamed_on_the_model(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.http_error(400, "ValidationException", "maxTokens must be at most 10000"))
    with pytest.raises(LLMError, match="max_tokens") as caught:
        await collect(llm)
    assert not isinstance(caught.value, LLMModelUnavailable)


async def test_service_unavailable_before_streaming(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.http_error(503, "ServiceUnavailableException", "Service is unavailable."))
    with pytest.raises(LLMUnavailable, match="retry"):
        await collect(llm)


async def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = BedrockLLM(section(endpoint_url=f"http://127.0.0.1:{port}"))
    try:
        with pytest.raises(LLMUnavailable, match="cannot reach Bedrock"):
            await collect(backend)
    finally:
        await backend.aclose()


async def test_missing_credentials_say_how_to_configure(
    server: BedrockStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    backend = BedrockLLM(section(endpoint_url=server.url))
    try:
        with pytest.raises(LLMAccessDenied, match="aws configure"):
            await collect(backend)
    finally:
        await backend.aclose()
    assert server.requests == []


async def test_unknown_profile_is_access_denied() -> None:
    with pytest.raises(LLMAccessDenied, match=r"llm\.bedrock\.profile"):
        BedrockLLM(section(profile="no-such-profile"))


async def test_closing_the_stream_hangs_up_while_the_model_is_still_generating(
    llm: BedrockLLM, server: BedrockStandIn
) -> None:
    # The stand-in holds the third delta for 30 s, so only a client that hangs up at once is seen leaving.
    server.queue(standin.Reply(deltas=[f" w{i}" for i in range(10)], hold_at=2))
    async with aclosing(llm.stream(QUESTION, system="", max_tokens=64, temperature=0.0)) as events:
        received = []
        async for item in events:
            received.append(item)
            if len(received) == 2:
                break
    assert received == [TextDelta(" w0"), TextDelta(" w1")]
    served = server.requests[0]
    assert await asyncio.to_thread(served.client_gone.wait, 10.0)
    assert served.deltas_sent == 2
    await llm._streams.join(timeout_s=10.0)
    assert llm._streams.live() == 0
    # The client is still usable after a barge-in.
    server.queue(standin.normal("again"))
    assert (await collect(llm))[0] == TextDelta("again")


async def test_cancelling_the_consumer_task_hangs_up(llm: BedrockLLM, server: BedrockStandIn) -> None:
    server.queue(standin.slow(count=40, delay_s=0.05))
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in llm.stream(QUESTION, system="", max_tokens=64, temperature=0.0):
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    served = server.requests[0]
    assert await asyncio.to_thread(served.client_gone.wait, 10.0)
    assert served.deltas_sent < 40
