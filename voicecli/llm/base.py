"""The LLM layer's vocabulary: chat messages, stream events, errors and the `LLM` protocol.

Every backend (Bedrock, an OpenAI-compatible server, an embedded GGUF model) speaks this one interface so the
voice pipeline can start speaking the first sentence while the rest is still being generated, and can stop a
backend mid-answer when the user barges in.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn of the conversation. The system prompt is not a message: it is passed to `LLM.stream`."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer, forwarded as soon as the backend produced it."""

    text: str


# Stop reasons use Bedrock's vocabulary for every backend, so callers need to know only one set.
END_TURN = "end_turn"
MAX_TOKENS = "max_tokens"
STOP_SEQUENCE = "stop_sequence"
CONTENT_FILTERED = "content_filtered"


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The answer is complete. Token counts are None where the backend does not report them."""

    stop_reason: str
    input_tokens: int | None = None
    output_tokens: int | None = None


StreamEvent = TextDelta | StreamEnd


class LLMError(Exception):
    """Base of every LLM failure. Its text says what happened and what the user can do about it."""

    def __init__(self, what: str, todo: str) -> None:
        super().__init__(f"{what}: {todo}")
        self.what = what
        self.todo = todo


class LLMThrottled(LLMError):
    """The service is rate-limiting us; retrying later (or a higher quota) helps."""


class LLMAccessDenied(LLMError):
    """Credentials are missing, invalid, or lack permission."""


class LLMModelUnavailable(LLMError):
    """The model is not enabled, not found, or its file is not installed."""


class LLMUnavailable(LLMError):
    """The endpoint cannot be reached or is down (connection refused, DNS, 5xx before streaming)."""


class LLMStreamError(LLMError):
    """The answer started but the stream failed part-way."""


@runtime_checkable
class LLM(Protocol):
    """A chat model that streams its answer.

    `stream` is an async generator: iterate it with `async for`. To stop early (barge-in), stop iterating AND
    close the generator, e.g. `async with contextlib.aclosing(llm.stream(...)) as events:`, or cancel the task
    that iterates it; either way the backend stops generating and releases its connection or thread promptly.
    (Merely abandoning it leaves the close to the garbage collector.) It is declared with a plain `def` because
    calling an async generator function returns the generator without awaiting; backends implement it with
    `async def ... yield`.
    """

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        system: str,
        max_tokens: int,
        temperature: float,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Yield TextDelta events, then exactly one StreamEnd; raise an LLMError subclass on failure."""
        ...

    async def aclose(self) -> None:
        """Release clients, connections and loaded models. The LLM must not be used afterwards."""
        ...
