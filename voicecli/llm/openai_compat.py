"""OpenAI-compatible streaming chat completions (Ollama, llama.cpp server, vLLM, OpenAI itself) over httpx.

Natively async: the SSE body is read with httpx's async client, so closing the generator closes the response and
its connection at once, which is what barge-in needs.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx

from voicecli.config import LlmOpenaiSettings
from voicecli.llm.base import (
    CONTENT_FILTERED,
    END_TURN,
    MAX_TOKENS,
    ChatMessage,
    LLMAccessDenied,
    LLMError,
    LLMModelUnavailable,
    LLMStreamError,
    LLMThrottled,
    LLMUnavailable,
    StreamEnd,
    StreamEvent,
    TextDelta,
)

_FINISH_REASONS = {"stop": END_TURN, "length": MAX_TOKENS, "content_filter": CONTENT_FILTERED}


class OpenAICompatLLM:
    """Streams answers from POST {base_url}/chat/completions with stream=true."""

    def __init__(
        self,
        settings: LlmOpenaiSettings,
        *,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 60.0,
        include_usage: bool = True,
    ) -> None:
        """`settings` is the [llm.openai] section as loaded. The keywords are tuning the config does not expose:
        `include_usage` asks for token counts in the last chunk (`stream_options`); off for a server that rejects
        that option."""
        self.settings = settings
        self._include_usage = include_usage
        timeout = httpx.Timeout(read_timeout_s, connect=connect_timeout_s)
        self._client = httpx.AsyncClient(base_url=settings.base_url.rstrip("/") + "/", timeout=timeout)

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.settings.api_key_env, "") if self.settings.api_key_env else ""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _body(self, messages: list[ChatMessage], system: str, max_tokens: int, temperature: float) -> dict[str, Any]:
        wire = [{"role": "system", "content": system}] if system else []
        wire += [{"role": m.role, "content": m.content} for m in messages]
        body: dict[str, Any] = {
            "model": self.settings.model,
            "messages": wire,
            "stream": True,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if self._include_usage:
            body["stream_options"] = {"include_usage": True}
        return body

    async def stream(
        self, messages: list[ChatMessage], *, system: str, max_tokens: int, temperature: float
    ) -> AsyncGenerator[StreamEvent, None]:
        body = self._body(messages, system, max_tokens, temperature)
        started = False
        try:
            async with self._client.stream("POST", "chat/completions", json=body, headers=self._headers()) as resp:
                if resp.status_code != 200:
                    detail = (await resp.aread()).decode("utf-8", "replace")
                    raise self._status_error(resp.status_code, _error_text(detail))
                started = True
                async with aclosing(_parse_sse(resp.aiter_lines())) as events:
                    async for event in events:
                        yield event
        except httpx.TransportError as exc:
            raise self._transport_error(exc, started) from exc

    def _status_error(self, status: int, detail: str) -> LLMError:
        where, said = self.settings.base_url, f"(HTTP {status}: {detail})" if detail else f"(HTTP {status})"
        if status in (401, 403):
            env = self.settings.api_key_env
            todo = (
                f"set {env} to a valid API key for this server"
                if env
                else "set llm.openai.api_key_env to the name of the variable holding the API key"
            )
            return LLMAccessDenied(f"{where} refused the request {said}", todo)
        if status == 404:
            return LLMModelUnavailable(
                f"{where} has no model {self.settings.model!r} or no /chat/completions route {said}",
                "check llm.openai.model (Ollama: `ollama pull NAME`) and that llm.openai.base_url ends in /v1",
            )
        if status == 429:
            return LLMThrottled(
                f"{where} is rate-limiting requests {said}",
                "wait a few seconds and retry, or raise the rate limit or quota of your account",
            )
        if status >= 500:
            return LLMUnavailable(f"the server at {where} failed {said}", "check that server's logs and retry")
        return LLMError(
            f"{where} rejected the request {said}",
            "check llm.openai.model, llm.max_tokens and llm.temperature against what the server accepts",
        )

    def _transport_error(self, exc: httpx.TransportError, started: bool) -> LLMError:
        where, said = self.settings.base_url, f"({type(exc).__name__}: {exc})"
        if started:
            return LLMStreamError(
                f"the connection to {where} broke during the answer {said}", "retry; check the server if it recurs"
            )
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return LLMUnavailable(
                f"cannot connect to {where} {said}",
                "start the server (e.g. `ollama serve`) or fix llm.openai.base_url",
            )
        return LLMUnavailable(f"{where} did not answer {said}", "check that the server is running and retry")

    async def aclose(self) -> None:
        await self._client.aclose()


def _error_text(body: str) -> str:
    """The server's own error message, from OpenAI-style {"error": {"message"}} JSON or the raw body."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body.strip()[:300]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        return str(error.get("message", error))[:300]
    if isinstance(error, str):
        return error[:300]
    return body.strip()[:300]


async def _parse_sse(lines: AsyncIterator[str]) -> AsyncGenerator[StreamEvent, None]:
    """Turn `data: {...}` lines into events; StreamEnd at [DONE] (or at a clean EOF after a finish_reason)."""
    finish: str | None = None
    usage: dict[str, Any] = {}
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, `event:` and `:` keep-alive comments
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise LLMStreamError(f"the server sent a malformed event ({data[:80]!r})", "retry") from exc
        if "error" in chunk:
            raise LLMStreamError(f"the server reported an error mid-answer ({_error_text(data)})", "retry")
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            text = (choice.get("delta") or {}).get("content")
            if text:
                yield TextDelta(text)
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    else:
        if finish is None:
            raise LLMStreamError(
                "the server closed the answer stream before it finished", "retry; check the server if it recurs"
            )
    yield StreamEnd(
        _FINISH_REASONS.get(finish or "stop", finish or END_TURN),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
    )
