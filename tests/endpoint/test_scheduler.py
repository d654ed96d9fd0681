"""FairScheduler: one job at a time, round-robin across sessions, cancellation and dropped sessions."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from voicecli_endpoint.scheduler import CancelToken, FairScheduler, JobDropped


@pytest.fixture
def scheduler() -> FairScheduler:
    """A fresh scheduler; its worker starts on the test's own event loop at the first submit."""
    return FairScheduler()


class Gate:
    """A job that blocks the inference thread until released, so the queue can be arranged behind it."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        self.release.wait(10)
        return "gate"


def record(log: list[str], name: str) -> Callable[[], str]:
    def job() -> str:
        log.append(name)
        return name
    return job


async def _blocked(scheduler: FairScheduler) -> tuple[Gate, asyncio.Task[object]]:
    gate = Gate()
    task: asyncio.Task[object] = asyncio.create_task(scheduler.submit("gate", gate))
    await asyncio.to_thread(gate.started.wait, 10)
    return gate, task


async def test_round_robin_across_sessions(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    order: list[str] = []
    tasks = [asyncio.create_task(scheduler.submit(key, record(order, f"{key}{n}")))
             for key, n in [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1), ("b", 2)]]
    await asyncio.sleep(0)  # let every submit enqueue
    gate.release.set()
    await asyncio.gather(gate_task, *tasks)
    assert order == ["a1", "b1", "c1", "a2", "b2", "a3"]


async def test_one_job_at_a_time(scheduler: FairScheduler) -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    def job() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        threading.Event().wait(0.01)
        with lock:
            running -= 1

    await asyncio.gather(*(scheduler.submit(f"s{n % 3}", job) for n in range(9)))
    assert peak == 1 and scheduler.stats.jobs_run == 9


async def test_result_carries_wait_and_run_times(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    waiting = asyncio.create_task(scheduler.submit("x", lambda: 42))
    await asyncio.sleep(0.05)
    gate.release.set()
    timed = await waiting
    await gate_task
    assert timed.value == 42 and timed.queue_wait_s >= 0.04 and timed.run_s >= 0


async def test_cancelled_token_skips_the_queued_job(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    ran: list[str] = []
    token = CancelToken()
    queued = asyncio.create_task(scheduler.submit("a", record(ran, "cancelled"), token))
    await asyncio.sleep(0)
    token.cancel()
    assert scheduler.drop_cancelled("a") == 1
    with pytest.raises(JobDropped):
        await queued  # fails at once, while the gate still holds the engine
    gate.release.set()
    await gate_task
    assert ran == []
    with pytest.raises(JobDropped):
        await scheduler.submit("a", record(ran, "late"), token)


async def test_result_of_a_job_cancelled_while_running_is_discarded(scheduler: FairScheduler) -> None:
    gate = Gate()
    token = CancelToken()
    task = asyncio.create_task(scheduler.submit("a", gate, token))
    await asyncio.to_thread(gate.started.wait, 10)
    token.cancel()
    gate.release.set()
    with pytest.raises(JobDropped):
        await task


async def test_drop_session_frees_its_queue_at_once(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    ran: list[str] = []
    doomed = [asyncio.create_task(scheduler.submit("gone", record(ran, f"gone{n}"))) for n in range(3)]
    survivor = asyncio.create_task(scheduler.submit("stays", record(ran, "stays")))
    await asyncio.sleep(0)
    assert scheduler.drop_session("gone") == 3 and scheduler.queued == 1
    for task in doomed:
        with pytest.raises(JobDropped):
            await task
    gate.release.set()
    await asyncio.gather(gate_task, survivor)
    assert ran == ["stays"]


async def test_awaiter_cancelled_means_the_job_never_runs(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    ran: list[str] = []
    task = asyncio.create_task(scheduler.submit("a", record(ran, "never")))
    await asyncio.sleep(0)
    task.cancel()
    gate.release.set()
    await gate_task
    await scheduler.submit("b", record(ran, "after"))
    assert ran == ["after"]


async def test_job_exception_reaches_the_submitter(scheduler: FairScheduler) -> None:
    def boom() -> None:
        raise RuntimeError("model exploded")

    with pytest.raises(RuntimeError, match="exploded"):
        await scheduler.submit("a", boom)
    assert (await scheduler.submit("a", lambda: "still works")).value == "still works"
