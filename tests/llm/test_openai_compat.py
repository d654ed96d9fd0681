"""The OpenAI-compatible backend against the SSE stand-in on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing

import pytest

from tests.standins import openai as standin
from tests.standins.openai import OpenAIStandIn
from voicecli.config import Config, LlmOpenaiSettings
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
from voicecli.llm.openai_compat import OpenAICompatLLM

# One loop for fixtures and tests: clients hold loop-bound connections across the fixture boundary.
pytestmark = pytest.mark.asyncio(loop_scope="session")

QUESTION = [ChatMessage("user", "Hi there")]
KEY_ENV = "VOICECLI_TEST_OPENAI_KEY"


def section(**changes: str) -> LlmOpenaiSettings:
    """[llm.openai] as shipped, with `changes`: what OpenAICompatLLM is given."""
    return dataclasses.replace(Config.defaults().llm.openai, **changes)


@pytest.fixture
def server() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as running:
        yield running


@pytest.fixture
async def llm(server: OpenAIStandIn, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OpenAICompatLLM]:
    monkeypatch.setenv(KEY_ENV, "sk-standin")
    backend = OpenAICompatLLM(section(base_url=server.base_url, model="tiny", api_key_env=KEY_ENV))
    yield backend
    await backend.aclose()


async def collect(llm: OpenAICompatLLM, messages: list[ChatMessage] = QUESTION) -> list[TextDelta | StreamEnd]:
    return [e async for e in llm.stream(messages, system="Be brief.", max_tokens=32, temperature=0.2)]


async def test_streams_deltas_then_end_with_usage(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    server.queue(standin.Reply(deltas=["Hi", "!"]))
    assert await collect(llm) == [TextDelta("Hi"), TextDelta("!"), StreamEnd("end_turn", 9, 4)]


async def test_sends_system_messages_key_and_sampling(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    await collect(llm, [ChatMessage("user", "a"), ChatMessage("assistant", "b"), ChatMessage("user", "c")])
    (request,) = server.requests
    assert request.headers["Authorization"] == "Bearer sk-standin"
    assert request.body["model"] == "tiny"
    assert request.body["stream"] is True
    assert request.body["max_tokens"] == 32
    assert request.body["temperature"] == 0.2
    assert request.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]


async def test_no_key_variable_sends_no_authorization(server: OpenAIStandIn) -> None:
    backend = OpenAICompatLLM(section(base_url=server.base_url, api_key_env=""), include_usage=False)
    try:
        events = await collect(backend)
    finally:
        await backend.aclose()
    assert "Authorization" not in server.requests[0].headers
    assert "stream_options" not in server.requests[0].body
    assert events[-1] == StreamEnd("end_turn", None, None)


async def test_length_finish_maps_to_max_tokens(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    server.queue(standin.Reply(finish_reason="length"))
    assert (await collect(llm))[-1] == StreamEnd("max_tokens", 9, 4)


async def test_first_delta_arrives_before_the_last_is_sent(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    reply = standin.Reply(deltas=["One", " two", " three"], hold_at=2)
    server.queue(reply)
    received: list[str] = []
    async for item in llm.stream(QUESTION, system="", max_tokens=8, temperature=0.0):
        if isinstance(item, TextDelta):
            if not received:
                assert not server.requests[0].last_delta_sent.is_set()
                reply.release.set()
            received.append(item.text)
    assert received == ["One", " two", " three"]


@pytest.mark.parametrize(
    ("status", "error", "hint"),
    [
        (401, LLMAccessDenied, KEY_ENV),
        (403, LLMAccessDenied, KEY_ENV),
        (404, LLMModelUnavailable, "ollama pull"),
        (429, LLMThrottled, "retry"),
        (500, LLMUnavailable, "logs"),
        (503, LLMUnavailable, "logs"),
        (400, LLMError, "llm.max_tokens"),
    ],
)
async def test_http_errors_map_to_actionable_errors(
    llm: OpenAICompatLLM, server: OpenAIStandIn, status: int, error: type[LLMError], hint: str
) -> None:
    server.queue(standin.http_error(status, "server says no"))
    with pytest.raises(error, match=hint) as caught:
        await collect(llm)
    assert type(caught.value) is error
    assert f"HTTP {status}: server says no" in str(caught.value)


async def test_connection_cut_mid_stream(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    server.queue(standin.Reply(deltas=["a", "b", "c"], drop_after=2))
    received: list[str] = []
    with pytest.raises(LLMStreamError, match="broke during the answer"):
        async for item in llm.stream(QUESTION, system="", max_tokens=8, temperature=0.0):
            assert isinstance(item, TextDelta)
            received.append(item.text)
    assert received == ["a", "b"]


async def test_clean_close_without_finish_is_a_stream_error(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    server.queue(standin.Reply(finish_reason="", send_done=False))
    with pytest.raises(LLMStreamError, match="before it finished"):
        await collect(llm)


async def test_connection_refused_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = OpenAICompatLLM(section(base_url=f"http://127.0.0.1:{port}/v1"))
    try:
        with pytest.raises(LLMUnavailable, match="cannot connect"):
            await collect(backend)
    finally:
        await backend.aclose()


async def test_closing_the_stream_hangs_up(llm: OpenAICompatLLM, server: OpenAIStandIn) -> None:
    server.queue(standin.Reply(deltas=[f" w{i}" for i in range(10)], hold_at=2))
    async with aclosing(llm.stream(QUESTION, system="", max_tokens=8, temperature=0.0)) as events:
        async for _ in events:
            break
    served = server.requests[0]
    assert await asyncio.to_thread(served.client_gone.wait, 10.0)
    assert served.deltas_sent < 10
    server.queue(standin.Reply(deltas=["again"]))
    assert (await collect(llm))[0] == TextDelta("again")
