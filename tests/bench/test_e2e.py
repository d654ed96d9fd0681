"""`voicecli bench e2e` makes every timed turn pay what a real turn pays for the LLM.

Real models throughout: the embedded SmolLM2 (wrapped only to record what it is asked, in order) and the session's
Kokoro endpoint. The bug this guards against: an untimed warm-up over the timed turn's own prompt left that prompt
in llama.cpp's prefix cache, so every timed turn reported an LLM time to first token of ~1 ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from tests.conftest import RunningServer
from voicecli.bench.e2e import MODES, WARM_PROMPT, run_e2e
from voicecli.bench.target import Target
from voicecli.bench.texts import E2E_SYSTEM_PROMPT
from voicecli.config import Config
from voicecli.converse.session import llm_from_config
from voicecli.llm import LLM, ChatMessage, StreamEvent

pytestmark = pytest.mark.slow


class Recording:
    """The real LLM, with a log of every request's (system prompt, user messages) in the order they were made."""

    def __init__(self, inner: LLM) -> None:
        self.inner = inner
        self.requests: list[tuple[str, list[str]]] = []

    async def stream(self, messages: list[ChatMessage], *, system: str, max_tokens: int,
                     temperature: float) -> AsyncGenerator[StreamEvent, None]:
        self.requests.append((system, [m.content for m in messages if m.role == "user"]))
        async for event in self.inner.stream(messages, system=system, max_tokens=max_tokens,
                                             temperature=temperature):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_each_timed_turn_evaluates_its_question_after_a_warm_up_of_the_system_prompt_only(
        server: RunningServer, models_dir: Path) -> None:
    config = Config.load(env={"VOICECLI_MODELS__DIR": str(models_dir), "VOICECLI_LLM__BACKEND": "local",
                              "VOICECLI_LLM__MAX_TOKENS": "16"})
    prompts = ["Say hello.", "Name a colour."]

    async def bench() -> tuple[Recording, list[float]]:
        llm = Recording(llm_from_config(config))
        try:
            samples = await run_e2e(config, Target("127.0.0.1", server.port, "", None), llm, [0.0], 2, prompts)
        finally:
            await llm.aclose()
        return llm, [s.metrics["llm_ttft_ms"] or 0.0 for s in samples]

    llm, ttfts = asyncio.run(bench())
    timed = [i for i, (_, users) in enumerate(llm.requests) if users[-1] in prompts]
    assert [llm.requests[i][1][-1] for i in timed] == [p for p in prompts for _ in MODES]
    for index in timed:
        system, users = llm.requests[index - 1]  # the request right before each timed turn: its warm-up
        assert system == E2E_SYSTEM_PROMPT and users == [WARM_PROMPT]
    assert all(users == [WARM_PROMPT] for i, (_, users) in enumerate(llm.requests) if i not in timed)
    assert all(t > 0 for t in ttfts)
