"""Bridge from a blocking, token-by-token producer (boto3, llama.cpp) running in a thread to an async generator.

boto3 and llama-cpp-python only offer blocking iteration. Running that iteration on the event loop would freeze
audio and UI, so it runs in a daemon thread and each event hops onto an asyncio.Queue with
`loop.call_soon_threadsafe`. Barge-in must stop generation at once, so closing the async generator sets a stop
flag the producer checks between tokens and calls the producer's non-blocking `interrupt()` (e.g. shutting down
the HTTP socket) to wake a producer that is blocked waiting for the next token.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Protocol

from voicecli.llm.base import StreamEvent

Emit = Callable[[StreamEvent], None]


class BlockingProducer(Protocol):
    """One answer's worth of blocking generation."""

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """Generate, calling `emit` per event; return early once `stop` is set; raise LLMError on failure."""
        ...

    def interrupt(self) -> None:
        """Called from the event loop after `stop` is set: unblock `run` promptly. Must not block."""
        ...


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


class _Done:
    pass


_DONE = _Done()


class ThreadedStreams:
    """Runs producers in daemon threads and remembers the live ones so `join` can wait for them on shutdown.

    Daemon threads, not the loop's default executor: a producer blocked on a silent socket must never keep the
    process from exiting.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    async def stream(self, producer: BlockingProducer) -> AsyncGenerator[StreamEvent, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StreamEvent | _Failed | _Done] = asyncio.Queue()
        stop = threading.Event()

        def put(item: StreamEvent | _Failed | _Done) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody listens any more
                stop.set()

        def work() -> None:
            try:
                producer.run(put, stop)
            except BaseException as exc:
                put(_Failed(exc))
            else:
                put(_DONE)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=work, name=self._name, daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()
        finished = False
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Done):
                    finished = True
                    return
                if isinstance(item, _Failed):
                    finished = True
                    raise item.error
                yield item
        finally:
            if not finished:
                stop.set()
                producer.interrupt()

    def live(self) -> int:
        """How many producer threads are still running (a cancelled one winds down after its current token)."""
        with self._lock:
            return len(self._threads)

    async def join(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for every producer thread to finish, without blocking the loop."""
        with self._lock:
            threads = list(self._threads)
        deadline = asyncio.get_running_loop().time() + timeout_s
        for thread in threads:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            await asyncio.to_thread(thread.join, remaining)
