"""`create_llm`: config sections map onto backends, and mistakes in them are reported with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicecli.llm import LLM, LLMError, create_llm
from voicecli.llm.bedrock import BedrockLLM
from voicecli.llm.local import LocalLLM
from voicecli.llm.openai_compat import OpenAICompatLLM

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_builds_each_backend_from_its_config_section(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    bedrock = create_llm("bedrock", model_id="us.amazon.nova-lite-v1:0", region="us-west-2", profile="")
    openai = create_llm("openai", base_url="http://127.0.0.1:1/v1", model="x", api_key_env="")
    local = create_llm("local", models_dir=tmp_path, model_file="m.gguf", threads=1, context_tokens=512)
    assert isinstance(bedrock, BedrockLLM) and bedrock.settings.region == "us-west-2"
    assert isinstance(openai, OpenAICompatLLM) and openai.settings.model == "x"
    assert isinstance(local, LocalLLM) and local.settings.model_path == tmp_path / "m.gguf"
    for llm in (bedrock, openai, local):
        assert isinstance(llm, LLM)
        await llm.aclose()


async def test_unknown_backend_lists_the_choices() -> None:
    with pytest.raises(LLMError, match="bedrock, openai"):
        create_llm("gpt")


async def test_unknown_setting_is_reported_with_the_valid_ones() -> None:
    with pytest.raises(LLMError, match=r"unknown setting\(s\) modelid .*model_id"):
        create_llm("bedrock", modelid="x")


async def test_missing_required_setting() -> None:
    with pytest.raises(LLMError, match="incomplete settings for the local"):
        create_llm("local")
