"""The embedded backend with the real SmolLM2-135M GGUF through llama-cpp-python (loaded once per session)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import pytest

from voicecli.config import Config, LlmLocalSettings
from voicecli.llm import ChatMessage, LLMError, LLMModelUnavailable, LLMUnavailable, StreamEnd, TextDelta
from voicecli.llm.local import DEFAULT_MODEL_FILE, LocalLLM
from voicecli.paths import default_models_dir

pytestmark = pytest.mark.asyncio(loop_scope="session")

MODELS_DIR = Path(os.environ.get("VOICECLI_MODELS_DIR") or default_models_dir())
SYSTEM = "You are a helpful voice assistant. Answer in short spoken sentences."


def section(**changes: str | int) -> LlmLocalSettings:
    """[llm.local] as shipped (the default model file), with `changes`: what LocalLLM is given."""
    return dataclasses.replace(Config.defaults().llm.local, **changes)


@pytest.fixture(scope="session")
async def smollm2() -> AsyncIterator[LocalLLM]:
    pytest.importorskip("llama_cpp", reason="needs the local-llm extra: pip install 'voicecli[local-llm]'")
    if not (MODELS_DIR / DEFAULT_MODEL_FILE).is_file():
        pytest.skip(f"{MODELS_DIR / DEFAULT_MODEL_FILE} missing: voicecli models install --only smollm2")
    llm = LocalLLM(section(threads=1, context_tokens=2048), models_dir=MODELS_DIR)
    await llm.load()
    yield llm
    await llm.aclose()


@pytest.mark.slow
async def test_streams_a_non_empty_answer(smollm2: LocalLLM) -> None:
    events = [
        e
        async for e in smollm2.stream(
            [ChatMessage("user", "What is the capital of France?")], system=SYSTEM, max_tokens=48, temperature=0.0
        )
    ]
    *deltas, end = events
    assert deltas and all(isinstance(d, TextDelta) for d in deltas)
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)).strip()
    assert isinstance(end, StreamEnd)
    assert end.stop_reason in {"end_turn", "max_tokens"}
    assert end.output_tokens == len(deltas)


@pytest.mark.slow
async def test_max_tokens_bounds_the_answer(smollm2: LocalLLM) -> None:
    question = [ChatMessage("user", "Write a long story about a dragon and a knight.")]
    events = [e async for e in smollm2.stream(question, system=SYSTEM, max_tokens=5, temperature=0.0)]
    assert events[-1] == StreamEnd("max_tokens", None, 5)


@pytest.mark.slow
async def test_closing_the_stream_stops_generation(smollm2: LocalLLM) -> None:
    question = [ChatMessage("user", "Tell me a long story about a dragon who learns to bake bread.")]
    full = [e async for e in smollm2.stream(question, system=SYSTEM, max_tokens=60, temperature=0.0)]
    assert len(full) > 20
    tokens_after_full = smollm2._llama.n_tokens

    received = 0
    async with aclosing(smollm2.stream(question, system=SYSTEM, max_tokens=60, temperature=0.0)) as events:
        async for _ in events:
            received += 1
            if received == 3:
                break
    await smollm2._streams.join(timeout_s=30.0)
    assert smollm2._streams.live() == 0
    # Same prompt, greedy decoding: the context holds the prompt plus only the tokens generated before the stop.
    assert smollm2._llama.n_tokens < tokens_after_full - 10


@pytest.mark.slow
async def test_conversation_longer_than_the_window(smollm2: LocalLLM) -> None:
    with pytest.raises(LLMError, match="context_tokens"):
        async for _ in smollm2.stream([ChatMessage("user", "word " * 3000)], system="", max_tokens=8, temperature=0.0):
            pass


async def test_missing_model_file_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(LLMModelUnavailable, match="voicecli models install --only smollm2"):
        LocalLLM(section(), models_dir=tmp_path)


async def test_missing_engine_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an install without the extra looks like
    llm = LocalLLM(section(model_file="model.gguf"), models_dir=tmp_path)
    with pytest.raises(LLMUnavailable, match=r"pip install 'voicecli\[local-llm\]'"):
        async for _ in llm.stream([ChatMessage("user", "hi")], system="", max_tokens=4, temperature=0.0):
            pass
    await llm.aclose()


async def test_damaged_model_file_is_unavailable(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    (tmp_path / "broken.gguf").write_bytes(b"not a gguf file at all" * 100)
    llm = LocalLLM(section(model_file="broken.gguf"), models_dir=tmp_path)
    with pytest.raises(LLMModelUnavailable, match="could not load"):
        await llm.load()
    await llm.aclose()
