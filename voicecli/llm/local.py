"""Embedded offline LLM: a GGUF model (SmolLM2-135M-Instruct by default) run in-process by llama-cpp-python.

llama.cpp generation is blocking, so it runs in a worker thread (see `threaded`) and checks the stop flag between
tokens: a barge-in stops it within one token. llama_cpp is imported only when the model is first loaded, so the
other backends work without the optional `local-llm` extra installed.

Two kinds of model, told apart by the GGUF itself (see `LocalLLM.chat`):
- an instruct model whose GGUF carries a chat template (SmolLM2-135M-Instruct) gets the conversation as chat
  messages, formatted by that template;
- a base model (Gemma 3 270M as published in registry packages: no chat template, never tuned to follow
  instructions) gets a plain-text completion prompt: the system prompt, then question/answer pairs, ending with
  "Answer:". A base model only continues text, so a chat template it never saw would make it continue the
  template's markup; a Q/A transcript is text it has seen countless times, and the examples (FEW_SHOT) show it the
  length and tone wanted. Its answer ends at the end of the line (the next line would be the next question).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import Any

from voicecli.config import LlmLocalSettings
from voicecli.llm.base import (
    CONTENT_FILTERED,
    END_TURN,
    MAX_TOKENS,
    ChatMessage,
    LLMError,
    LLMModelUnavailable,
    LLMUnavailable,
    StreamEnd,
    StreamEvent,
    TextDelta,
)
from voicecli.llm.threaded import Emit, ThreadedStreams

LOCAL_MODELS: dict[str, Path] = {
    "smollm2": Path("smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3-270m": Path("gemma3-270m") / "gemma-3-270m-q4_k_m.gguf",
}
"""llm.local.model's choices: the model catalog's name (voicecli/models/catalog.py, `voicecli models install --only
NAME`) -> its GGUF under the models directory. config.py's choice list and the catalog are held equal to it by
tests (this layer does not import the catalog)."""
DEFAULT_MODEL_FILE = LOCAL_MODELS["smollm2"]
_FINISH_REASONS = {"stop": END_TURN, "length": MAX_TOKENS, "content_filter": CONTENT_FILTERED}

FEW_SHOT: tuple[tuple[str, str], ...] = (
    ("What is the capital of Australia?", "The capital of Australia is Canberra."),
    ("What is the chemical symbol for gold?", "The chemical symbol for gold is Au."),
    ("What is nine plus five?", "Nine plus five is 14."),
    ("What did I eat for breakfast today?", "I don't know."),
)
"""Example turns shown before the conversation (always to a base model, to a chat model with llm.local.few_shot):
generic questions of the kind a voice assistant hears, each answered in one short sentence that states the fact,
and one the assistant cannot know, answered "I don't know." They are not (and must not be) questions of the bench
sets (voicecli/bench/question_sets.py), whose answers would otherwise be given away."""
COMPLETION_QUESTION = "Question: "
COMPLETION_ANSWER = "Answer:"
COMPLETION_STOP = ["\n"]
"""A base model's answer is one line: the next line would be the next question it invents."""
PREFILL_QUESTION = "?"
"""The stand-in question `LocalLLM.prefill` reads the context behind: the next prompt shares everything before it."""


def _install_advice(settings: LlmLocalSettings) -> str:
    return (f"install it with `voicecli models install --only {settings.model}`, or point llm.local.model_file at "
            "a GGUF")


def local_model_path(settings: LlmLocalSettings, models_dir: Path) -> Path:
    """The GGUF the embedded backend loads: llm.local.model_file (a relative path is under `models_dir`), or the
    file of the catalog model llm.local.model names, under `models_dir`, when that setting is empty."""
    if settings.model_file:
        return models_dir / Path(settings.model_file).expanduser()
    return models_dir / LOCAL_MODELS[settings.model]


def completion_prompt(messages: list[ChatMessage], system: str, examples: tuple[tuple[str, str], ...]) -> str:
    """A base model's prompt: the system prompt, the example Q/A pairs and the conversation as one Q/A transcript,
    ending where the answer to the last user message begins (see the module docstring)."""
    blocks = [system.strip()] if system.strip() else []
    pairs: list[str] = [f"{COMPLETION_QUESTION}{q}\n{COMPLETION_ANSWER} {a}" for q, a in examples]
    for message in messages:
        text = " ".join(message.content.split())  # one line each: a newline ends an answer
        if message.role == "user":
            pairs.append(f"{COMPLETION_QUESTION}{text}\n{COMPLETION_ANSWER}")
        elif pairs and pairs[-1].endswith(COMPLETION_ANSWER):
            pairs[-1] += f" {text}"
    blocks.extend(pairs)
    return "\n\n".join(blocks)


def chat_messages(messages: list[ChatMessage], system: str,
                  examples: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    """A chat model's messages: the system prompt, the example turns, then the conversation."""
    wire = [{"role": "system", "content": system}] if system else []
    for question, answer in examples:
        wire += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return wire + [{"role": m.role, "content": m.content} for m in messages]


class LocalLLM:
    """Streams answers from a GGUF chat model loaded into this process (once, on first use or `load()`)."""

    def __init__(self, settings: LlmLocalSettings, *, models_dir: Path) -> None:
        """`settings` is the [llm.local] section as loaded; `models_dir` the app's models directory (config's
        `models_dir`; tests: VOICECLI_MODELS_DIR), where the model file is looked up."""
        self.settings = settings
        self.model_path = local_model_path(settings, models_dir)
        if not self.model_path.is_file():
            raise LLMModelUnavailable(f"the local model file {self.model_path} is missing",
                                      _install_advice(settings))
        self._llama: Any = None
        self._chat = True
        self._lock = threading.Lock()  # a llama.cpp context runs one generation at a time
        self._streams = ThreadedStreams("local-llm")
        self._go = threading.Event()
        self._go.set()
        self._paused_until = 0.0

    def pause(self, max_s: float = 2.0) -> None:
        """Stop generating between tokens until `resume()`, or for at most `max_s`.

        Why: this model shares the machine's cores with the local TTS engine. While the first sentence of an
        answer is being synthesized, nobody is listening yet and the rest of the answer is not needed for a second
        or more (the first sentence will be playing), so the pipeline lends the LLM's core to the synthesis of
        that sentence (measured on 2 cores: a 6-word first sentence ~540 ms with generation running, ~380 ms
        without).
        """
        self._paused_until = time.monotonic() + max_s
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def _wait_if_paused(self, stop: threading.Event) -> None:
        while not self._go.is_set() and not stop.is_set():
            left = self._paused_until - time.monotonic()
            if left <= 0:
                self._go.set()
                break
            self._go.wait(min(left, 0.05))

    def _load_locked(self) -> Any:
        if self._llama is None:
            try:
                import llama_cpp
            except ImportError as exc:
                raise LLMUnavailable(
                    f"the embedded LLM engine (llama-cpp-python) is not installed ({exc})",
                    'run `pip install \'voicecli[local-llm]\'`, or choose llm.backend = "bedrock" or "openai"',
                ) from exc
            try:
                self._llama = llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_threads=self.settings.threads,
                    # Also one thread for reading the prompt: with two, llama.cpp's thread pool kept a core busy
                    # into the first sentence's synthesis (turns bench: TTS of the first piece 476-540 ms with two,
                    # 385 ms with one; the prompt read ~25 ms slower).
                    n_threads_batch=self.settings.threads,
                    n_ctx=self.settings.context_tokens,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise LLMModelUnavailable(
                    f"llama.cpp could not load {self.model_path} ({exc})",
                    "the file may be damaged or not a GGUF model: " + _install_advice(self.settings),
                ) from exc
            self._chat = bool(self._llama.metadata.get("tokenizer.chat_template"))
        return self._llama

    @property
    def chat(self) -> bool:
        """Whether the loaded model gets chat messages (its GGUF has a chat template) or, a base model, a completion
        prompt (see the module docstring). True until the model is loaded."""
        return self._chat

    async def load(self) -> None:
        """Load the model now (off the event loop) so the first answer does not pay for it."""
        await asyncio.to_thread(self._load_under_lock)

    def _load_under_lock(self) -> None:
        with self._lock:
            self._load_locked()

    async def prefill(self, messages: list[ChatMessage], *, system: str) -> None:
        """Read the next question's context now: the system prompt and `messages` (the conversation the next question
        will follow) go through llama.cpp behind a stand-in question, one token generated. llama.cpp keeps what it
        read and, for the next prompt, reads only what differs from it (the longest shared prefix), so the next
        answer reads little more than its own question.

        Why: reading the context is most of the first token's wait. In `turns-20261205-echo-rounds` the first
        question of every app session waited 269-326 ms for its first token (the system prompt unread), the second
        55-94 ms; in a long session (`turns-20261204-holdout-lm-8`) every turn after the history window stepped
        (llm/history.py) 228-364 ms against 67-161. The front ends call it at start-up, and the pipeline after
        each turn, while the user listens or thinks. Best effort: a context that does not fit is left to the next
        answer, which says so."""
        question = ChatMessage("user", PREFILL_QUESTION)
        try:
            async with aclosing(self.stream([*messages, question], system=system, max_tokens=1,
                                            temperature=0.0)) as events:
                async for _ in events:
                    pass
        except LLMError:  # a context longer than the window, a model gone: the next answer reports it
            return

    async def stream(
        self, messages: list[ChatMessage], *, system: str, max_tokens: int, temperature: float
    ) -> AsyncGenerator[StreamEvent, None]:
        generation = _Generation(self, messages, system, max_tokens, temperature)
        async with aclosing(self._streams.stream(generation)) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        await self._streams.join(timeout_s=10.0)
        await asyncio.to_thread(self._unload)

    def _unload(self) -> None:
        with self._lock:  # waits for a generation that is finishing its last token
            if self._llama is not None:
                self._llama.close()
                self._llama = None


class _Generation:
    """One answer, generated token by token in the worker thread."""

    def __init__(self, owner: LocalLLM, messages: list[ChatMessage], system: str, max_tokens: int,
                 temperature: float) -> None:
        self._owner = owner
        self._messages = messages
        self._system = system
        self._max_tokens = max_tokens
        self._temperature = temperature

    def _start(self, llama: Any) -> Any:
        """llama.cpp's chunk iterator for this answer, in the form the loaded model takes (see `LocalLLM.chat`)."""
        if self._owner.chat:
            examples = FEW_SHOT if self._owner.settings.few_shot else ()
            wire = chat_messages(self._messages, self._system, examples)
            return llama.create_chat_completion(
                messages=wire, max_tokens=self._max_tokens, temperature=self._temperature, stream=True,
                repeat_penalty=self._owner.settings.repeat_penalty,
            )
        prompt = completion_prompt(self._messages, self._system, FEW_SHOT)
        return llama.create_completion(
            prompt=prompt, max_tokens=self._max_tokens, temperature=self._temperature, stop=COMPLETION_STOP,
            stream=True, repeat_penalty=self._owner.settings.repeat_penalty,
        )

    def run(self, emit: Emit, stop: threading.Event) -> None:
        with self._owner._lock:
            llama = self._owner._load_locked()
            if stop.is_set():
                return
            chat = self._owner.chat
            finish: str | None = None
            pieces = 0
            chunks: Any = None
            try:
                chunks = self._start(llama)
                for chunk in chunks:
                    self._owner._wait_if_paused(stop)
                    if stop.is_set():
                        return
                    choice = chunk["choices"][0]
                    text = choice.get("delta", {}).get("content") if chat else choice.get("text")
                    if text and not pieces:
                        text = text.lstrip()  # a completion's answer starts after "Answer:" with a space
                    if text:
                        pieces += 1
                        emit(TextDelta(text))
                    finish = choice.get("finish_reason") or finish
            except ValueError as exc:  # llama-cpp-python raises it for a prompt longer than the window
                raise LLMError(
                    f"the conversation does not fit the local model's context ({exc})",
                    "raise llm.local.context_tokens or lower llm.history_turns",
                ) from exc
            finally:
                if chunks is not None:
                    chunks.close()
        # llama.cpp streams one chunk per token (rarely fewer, when a multi-byte character spans tokens).
        emit(StreamEnd(_FINISH_REASONS.get(finish or "stop", finish or END_TURN), None, pieces))

    def interrupt(self) -> None:
        pass  # the stop flag is checked between tokens; a token takes tens of milliseconds
