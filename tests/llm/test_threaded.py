"""The thread-to-asyncio bridge with plain blocking producers (no model, no network)."""

from __future__ import annotations

import threading
from contextlib import aclosing

import pytest

from voicecli.llm import LLMStreamError, StreamEnd, TextDelta
from voicecli.llm.threaded import Emit, ThreadedStreams

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Counter:
    """Emits numbered deltas; blocks before each one until the test lets it go (or interrupt() does)."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.go = threading.Semaphore(0)
        self.interrupted = threading.Event()
        self.stopped_at: int | None = None

    def run(self, emit: Emit, stop: threading.Event) -> None:
        for i in range(self.count):
            self.go.acquire()
            if stop.is_set():
                self.stopped_at = i
                return
            if i == self.fail_at:
                raise LLMStreamError("broke", "retry")
            emit(TextDelta(str(i)))
        emit(StreamEnd("end_turn", None, self.count))

    def interrupt(self) -> None:
        self.interrupted.set()
        self.go.release()  # wake the blocked producer, as closing a socket would


async def test_events_arrive_in_order_and_the_thread_ends() -> None:
    streams = ThreadedStreams("test")
    producer = Counter(3)
    for _ in range(3):
        producer.go.release()
    events = [e async for e in streams.stream(producer)]
    assert events == [TextDelta("0"), TextDelta("1"), TextDelta("2"), StreamEnd("end_turn", None, 3)]
    await streams.join(5.0)
    assert streams.live() == 0
    assert not producer.interrupted.is_set()


async def test_errors_from_the_thread_are_raised_to_the_consumer() -> None:
    streams = ThreadedStreams("test")
    producer = Counter(3, fail_at=1)
    for _ in range(3):
        producer.go.release()
    received = []
    with pytest.raises(LLMStreamError):
        async for event in streams.stream(producer):
            received.append(event)
    assert received == [TextDelta("0")]


async def test_closing_early_stops_and_interrupts_the_producer() -> None:
    streams = ThreadedStreams("test")
    producer = Counter(100)
    producer.go.release()
    async with aclosing(streams.stream(producer)) as events:
        async for _ in events:
            break
    assert producer.interrupted.is_set()
    await streams.join(5.0)
    assert streams.live() == 0
    assert producer.stopped_at == 1
