"""voicecli's LLM layer: one streaming interface (`LLM`) over Bedrock, OpenAI-compatible servers and a local GGUF.

Backends are imported lazily by `create_llm`, so a user of one backend never pays for (or needs) another's
dependencies.
"""

from __future__ import annotations

from pathlib import Path

from voicecli.config import LlmSettings
from voicecli.llm.base import (
    CONTENT_FILTERED,
    END_TURN,
    LLM,
    MAX_TOKENS,
    STOP_SEQUENCE,
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

__all__ = [
    "CONTENT_FILTERED",
    "END_TURN",
    "LLM",
    "MAX_TOKENS",
    "STOP_SEQUENCE",
    "ChatMessage",
    "LLMAccessDenied",
    "LLMError",
    "LLMModelUnavailable",
    "LLMStreamError",
    "LLMThrottled",
    "LLMUnavailable",
    "StreamEnd",
    "StreamEvent",
    "TextDelta",
    "context_turns",
    "create_llm",
]

BACKENDS = ("local", "bedrock", "openai")
"""What `create_llm` builds; config's `llm.backend` accepts exactly these (a test holds the two lists equal)."""


def context_turns(settings: LlmSettings) -> int:
    """How many earlier exchanges the conversation keeps as context for this backend: llm.history_turns, and for
    the embedded model at most llm.local.history_turns too. Why a bound of its own: SmolLM2-135M, a few turns into a
    conversation, copies an earlier answer for a new question (`voicecli bench llm`, quality set, temperature 0: 22
    of 36 right with 8 exchanges, 27 with 2), where a large hosted model uses the longer context well."""
    if settings.backend == "local":
        return min(settings.history_turns, settings.local.history_turns)
    return settings.history_turns


def create_llm(settings: LlmSettings, *, models_dir: Path) -> LLM:
    """The backend `settings.backend` names, built from its own typed section (`settings.bedrock`, ...).

    The sections are config's dataclasses, already checked key by key and value by value when the configuration
    was loaded, so a misspelt or missing setting never reaches here. `models_dir` is where "local" looks for its
    model file (config's `models_dir`: models.dir or the XDG data directory); the other backends ignore it.
    """
    if settings.backend == "bedrock":
        from voicecli.llm.bedrock import BedrockLLM

        return BedrockLLM(settings.bedrock)
    if settings.backend == "openai":
        from voicecli.llm.openai_compat import OpenAICompatLLM

        return OpenAICompatLLM(settings.openai)
    if settings.backend == "local":
        from voicecli.llm.local import LocalLLM

        return LocalLLM(settings.local, models_dir=models_dir)
    # Config.load refuses any other name; this guards a section built or replaced in code.
    raise LLMError(f"unknown LLM backend {settings.backend!r}", f"set llm.backend to one of {', '.join(BACKENDS)}")
