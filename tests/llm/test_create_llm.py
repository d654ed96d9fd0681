"""`create_llm`: the typed [llm] sections go to the backend `llm.backend` names, as loaded, with no copy between."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from voicecli.config import CONSTRAINTS, Choice, Config
from voicecli.llm import BACKENDS, LLM, LLMError, LLMModelUnavailable, create_llm
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.local import DEFAULT_MODEL_FILE, LocalLLM
from voicecli.llm.openai_compat import OpenAICompatLLM


def configured(**values: str) -> Config:
    """The shipped defaults with `values` (dotted keys) set, validated as any config layer is."""
    return Config.defaults().override(values, "test")


async def test_builds_each_backend_from_its_config_section(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    bedrock_config = configured(**{"llm.backend": "bedrock", "llm.bedrock.region": "us-west-2"})
    openai_config = configured(**{"llm.backend": "openai", "llm.openai.model": "x", "llm.openai.api_key_env": ""})
    local_config = configured(**{"llm.backend": "local", "llm.local.model_file": "m.gguf"})
    bedrock = create_llm(bedrock_config.llm, models_dir=tmp_path)
    openai = create_llm(openai_config.llm, models_dir=tmp_path)
    local = create_llm(local_config.llm, models_dir=tmp_path)
    assert isinstance(bedrock, BedrockLLM) and bedrock.settings is bedrock_config.llm.bedrock
    assert bedrock.settings.region == "us-west-2"
    assert isinstance(openai, OpenAICompatLLM) and openai.settings is openai_config.llm.openai
    assert openai.settings.model == "x"
    assert isinstance(local, LocalLLM) and local.settings is local_config.llm.local
    assert local.model_path == tmp_path / "m.gguf"
    for llm in (bedrock, openai, local):
        assert isinstance(llm, LLM)
        await llm.aclose()


async def test_local_looks_for_the_default_model_in_the_models_dir(tmp_path: Path) -> None:
    with pytest.raises(LLMModelUnavailable, match=str(tmp_path / DEFAULT_MODEL_FILE)):
        create_llm(configured(**{"llm.backend": "local"}).llm, models_dir=tmp_path)


def test_config_accepts_exactly_the_backends_create_llm_builds() -> None:
    # config may not import llm (layers), so the two lists are held equal here: a backend config accepts but
    # create_llm cannot build would only fail when a session starts.
    choice = CONSTRAINTS["llm.backend"]
    assert isinstance(choice, Choice)
    assert set(choice.options) == set(BACKENDS)


async def test_a_backend_name_set_in_code_is_still_checked() -> None:
    # Config.load refuses an unknown llm.backend (tests/test_config.py); a section replaced in code is not loaded.
    settings = dataclasses.replace(Config.defaults().llm, backend="gpt")
    with pytest.raises(LLMError, match="bedrock, openai"):
        create_llm(settings, models_dir=Path())
