"""Embedded offline LLM: a GGUF model (SmolLM2-135M-Instruct by default) run in-process by llama-cpp-python.

llama.cpp generation is blocking, so it runs in a worker thread (see `threaded`) and checks the stop flag between
tokens: a barge-in stops it within one token. llama_cpp is imported only when the model is first loaded, so the
other backends work without the optional `local-llm` extra installed.
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

DEFAULT_MODEL_FILE = Path("smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_MODEL = "install it with `voicecli models install --only smollm2`, or point llm.local.model_file at a GGUF"
_FINISH_REASONS = {"stop": END_TURN, "length": MAX_TOKENS, "content_filter": CONTENT_FILTERED}


def local_model_path(settings: LlmLocalSettings, models_dir: Path) -> Path:
    """The GGUF the embedded backend loads: llm.local.model_file (a relative path is under `models_dir`), or
    DEFAULT_MODEL_FILE under `models_dir` when that setting is empty."""
    return models_dir / (Path(settings.model_file).expanduser() if settings.model_file else DEFAULT_MODEL_FILE)


class LocalLLM:
    """Streams answers from a GGUF chat model loaded into this process (once, on first use or `load()`)."""

    def __init__(self, settings: LlmLocalSettings, *, models_dir: Path) -> None:
        """`settings` is the [llm.local] section as loaded; `models_dir` the app's models directory (config's
        `models_dir`; tests: VOICECLI_MODELS_DIR), where the model file is looked up."""
        self.settings = settings
        self.model_path = local_model_path(settings, models_dir)
        if not self.model_path.is_file():
            raise LLMModelUnavailable(f"the local model file {self.model_path} is missing", _INSTALL_MODEL)
        self._llama: Any = None
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
                    "the file may be damaged or not a GGUF chat model: " + _INSTALL_MODEL,
                ) from exc
        return self._llama

    async def load(self) -> None:
        """Load the model now (off the event loop) so the first answer does not pay for it."""
        await asyncio.to_thread(self._load_under_lock)

    def _load_under_lock(self) -> None:
        with self._lock:
            self._load_locked()

    async def stream(
        self, messages: list[ChatMessage], *, system: str, max_tokens: int, temperature: float
    ) -> AsyncGenerator[StreamEvent, None]:
        wire = [{"role": "system", "content": system}] if system else []
        wire += [{"role": m.role, "content": m.content} for m in messages]
        generation = _Generation(self, wire, max_tokens, temperature)
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

    def __init__(self, owner: LocalLLM, wire: list[dict[str, str]], max_tokens: int, temperature: float) -> None:
        self._owner = owner
        self._wire = wire
        self._max_tokens = max_tokens
        self._temperature = temperature

    def run(self, emit: Emit, stop: threading.Event) -> None:
        with self._owner._lock:
            llama = self._owner._load_locked()
            if stop.is_set():
                return
            chunks = llama.create_chat_completion(
                messages=self._wire, max_tokens=self._max_tokens, temperature=self._temperature, stream=True
            )
            finish: str | None = None
            pieces = 0
            try:
                for chunk in chunks:
                    self._owner._wait_if_paused(stop)
                    if stop.is_set():
                        return
                    choice = chunk["choices"][0]
                    text = choice.get("delta", {}).get("content")
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
                chunks.close()
        # llama.cpp streams one chunk per token (rarely fewer, when a multi-byte character spans tokens).
        emit(StreamEnd(_FINISH_REASONS.get(finish or "stop", finish or END_TURN), None, pieces))

    def interrupt(self) -> None:
        pass  # the stop flag is checked between tokens; a token takes tens of milliseconds
