"""voicecli.converse.session: what the app assembles from the config."""

from __future__ import annotations

from voicecli.config import Config
from voicecli.converse.session import llm_label


def test_the_llm_label_names_the_local_model_that_answers() -> None:
    """The status bar and the bench results say which local model answered (not always SmolLM2)."""
    assert llm_label(Config.load(env={})) == "local SmolLM2-135M-Instruct.Q4_1"
    assert "gemma-3-270m" in llm_label(Config.load(env={"VOICECLI_LLM__LOCAL__MODEL": "gemma3-270m"}))
    assert llm_label(Config.load(env={"VOICECLI_LLM__LOCAL__MODEL_FILE": "mine/qwen.gguf"})) == "local qwen"
