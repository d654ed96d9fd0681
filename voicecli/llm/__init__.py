"""voicecli's LLM layer: one streaming interface (`LLM`) over Bedrock, OpenAI-compatible servers and a local GGUF.

Backends are imported lazily by `create_llm`, so a user of one backend never pays for (or needs) another's
dependencies.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
    "create_llm",
]

BACKENDS = ("local", "bedrock", "openai")


def create_llm(backend: str, **settings: Any) -> LLM:
    """Build the backend named by config `llm.backend` from its section's keys (e.g. [llm.bedrock]).

    "local" also needs `models_dir` (a Path). Unknown keys are rejected with the list of valid ones, so a typo
    in the config file is reported rather than silently ignored.
    """
    settings_class: Any
    factory: Any
    if backend == "bedrock":
        from voicecli.llm.bedrock import BedrockLLM, BedrockSettings

        settings_class, factory = BedrockSettings, BedrockLLM
    elif backend in ("openai", "openai_compat", "openai-compat"):
        from voicecli.llm.openai_compat import OpenAICompatLLM, OpenAISettings

        settings_class, factory = OpenAISettings, OpenAICompatLLM
    elif backend == "local":
        from voicecli.llm.local import LocalLLM, LocalSettings

        settings_class, factory = LocalSettings, LocalLLM
    else:
        raise LLMError(f"unknown LLM backend {backend!r}", f"set llm.backend to one of {', '.join(BACKENDS)}")
    known = {f.name for f in dataclasses.fields(settings_class)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise LLMError(
            f"unknown setting(s) {', '.join(unknown)} for the {backend} LLM backend",
            f"use only {', '.join(sorted(known))}",
        )
    try:
        config = settings_class(**settings)
    except TypeError as exc:  # a required setting is missing
        raise LLMError(
            f"incomplete settings for the {backend} LLM backend ({exc})", "pass every required setting"
        ) from exc
    llm: LLM = factory(config)
    return llm
