"""FairScheduler: N parallel workers, priorities (first pieces, closest to running dry, round robin), cancellation
and dropped sessions."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from voicecli_endpoint.scheduler import Batching, CancelToken, FairScheduler, JobDropped, Stepper

from voicecli.wire.playout import Playout


@pytest.fixture
def scheduler() -> FairScheduler:
    """A fresh one-worker scheduler; its worker starts on the test's own event loop at the first submit."""
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


@pytest.mark.parametrize("workers", [1, 2, 3])
async def test_jobs_run_in_parallel_up_to_the_worker_count(workers: int) -> None:
    scheduler = FairScheduler(workers)
    running = 0
    peak = 0
    lock = threading.Lock()

    def job() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        threading.Event().wait(0.05)
        with lock:
            running -= 1

    await asyncio.gather(*(scheduler.submit(f"s{n % 4}", job) for n in range(12)))
    await scheduler.close()
    assert peak == workers and scheduler.stats.jobs_run == 12


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairScheduler(0)


async def test_first_pieces_of_turns_go_ahead_of_later_pieces(scheduler: FairScheduler) -> None:
    gate, gate_task = await _blocked(scheduler)
    order: list[str] = []
    later = [asyncio.create_task(scheduler.submit(key, record(order, f"{key}-later")))
             for key in ("a", "b")]
    firsts = [asyncio.create_task(scheduler.submit(key, record(order, f"{key}-first"), first=True))
              for key in ("c", "d")]
    await asyncio.sleep(0)
    gate.release.set()
    await asyncio.gather(gate_task, *later, *firsts)
    assert order == ["c-first", "d-first", "a-later", "b-later"]
    assert scheduler.stats.first_jobs_run == 2


async def test_the_session_closest_to_running_dry_goes_next() -> None:
    now = 100.0
    scheduler = FairScheduler(clock=lambda: now)
    gate, gate_task = await _blocked(scheduler)
    order: list[str] = []
    listeners = {"plenty": Playout(), "little": Playout(), "dry": Playout()}
    listeners["plenty"].add(now, 5.0)  # 5 s of audio still to play
    listeners["little"].add(now, 0.5)
    listeners["dry"].add(now - 9.0, 2.0)  # ran out 7 s ago: counts as 0 s ahead
    tasks = [asyncio.create_task(scheduler.submit(key, record(order, key), playout=listeners[key]))
             for key in ("plenty", "little", "dry")]
    tasks.append(asyncio.create_task(scheduler.submit("no-playout", record(order, "no-playout"))))
    await asyncio.sleep(0)
    gate.release.set()
    await asyncio.gather(gate_task, *tasks)
    # "dry" and "no-playout" tie at 0 s ahead: round robin keeps the order they joined in
    assert order == ["dry", "no-playout", "little", "plenty"]


async def test_a_first_piece_beats_a_dry_session() -> None:
    scheduler = FairScheduler()
    gate, gate_task = await _blocked(scheduler)
    order: list[str] = []
    dry = asyncio.create_task(scheduler.submit("dry", record(order, "dry"), playout=Playout()))
    new_turn = asyncio.create_task(scheduler.submit("busy", record(order, "new-turn"), first=True))
    await asyncio.sleep(0)
    gate.release.set()
    await asyncio.gather(gate_task, dry, new_turn)
    assert order == ["new-turn", "dry"]


async def test_a_cancel_drops_queued_work_across_workers() -> None:
    """Both workers busy; one session's queued jobs are all dropped by its cancel, whichever worker frees first,
    and a job of it already running finishes with its result discarded."""
    scheduler = FairScheduler(2)
    token = CancelToken()
    running = Gate()
    running_task: asyncio.Task[object] = asyncio.create_task(scheduler.submit("a", running, token))
    await asyncio.to_thread(running.started.wait, 10)
    other = Gate()
    other_task: asyncio.Task[object] = asyncio.create_task(scheduler.submit("b", other))
    await asyncio.to_thread(other.started.wait, 10)
    ran: list[str] = []
    queued = [asyncio.create_task(scheduler.submit("a", record(ran, f"a{n}"), token, first=n == 0))
              for n in range(4)]
    survivors = [asyncio.create_task(scheduler.submit(key, record(ran, key))) for key in ("b2", "c")]
    await asyncio.sleep(0)
    assert scheduler.queued == 6 and scheduler.running == 2
    token.cancel()
    assert scheduler.drop_cancelled("a") == 4 and scheduler.queued == 2
    for task in queued:
        with pytest.raises(JobDropped):
            await task  # at once, while both workers are still busy
    assert scheduler.running == 2
    running.release.set()
    other.release.set()
    with pytest.raises(JobDropped):
        await running_task
    await asyncio.gather(other_task, *survivors)
    await scheduler.close()
    assert sorted(ran) == ["b2", "c"]
    assert scheduler.stats.jobs_dropped == 5


async def test_a_cancelled_job_is_skipped_even_without_drop_cancelled() -> None:
    scheduler = FairScheduler(2)
    gates = [Gate(), Gate()]
    gate_tasks = [asyncio.create_task(scheduler.submit(f"g{n}", gate)) for n, gate in enumerate(gates)]
    for gate in gates:
        await asyncio.to_thread(gate.started.wait, 10)
    ran: list[str] = []
    token = CancelToken()
    doomed = asyncio.create_task(scheduler.submit("a", record(ran, "doomed"), token, first=True))
    kept = asyncio.create_task(scheduler.submit("b", record(ran, "kept")))
    await asyncio.sleep(0)
    token.cancel()
    for gate in gates:
        gate.release.set()
    with pytest.raises(JobDropped):
        await doomed
    await asyncio.gather(kept, *gate_tasks)
    await scheduler.close()
    assert ran == ["kept"]


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


# --- batching (the torch engine on a GPU) ---

class Batcher:
    """A `Batching.run` that records the items of every call and answers each item with its upper-cased text."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, items: Sequence[Any]) -> list[str]:
        self.calls.append(list(items))
        return [str(item).upper() for item in items]


def batching_scheduler(batcher: Batcher, max_batch: int = 8, window_s: float = 0.0) -> FairScheduler:
    return FairScheduler(1, batching=Batching(batcher, max_batch, window_s))


def single(item: str) -> Callable[[], str]:
    """The job's own function: what it does when it runs alone (marked so the test can tell)."""
    return lambda: f"alone:{item}"


async def test_queued_pieces_of_different_sessions_share_one_call() -> None:
    batcher = Batcher()
    scheduler = batching_scheduler(batcher)
    gate, gate_task = await _blocked(scheduler)
    order: list[str] = []
    tasks = [asyncio.create_task(scheduler.submit(key, single(key), item=key)) for key in ("a", "b", "c")]
    g2p = asyncio.create_task(scheduler.submit("d", record(order, "d-g2p")))  # no item: never batched
    await asyncio.sleep(0)
    gate.release.set()
    results = await asyncio.gather(*tasks)
    await asyncio.gather(gate_task, g2p)
    await scheduler.close()
    assert [r.value for r in results] == ["A", "B", "C"]  # each awaiter gets its own item's result
    assert batcher.calls == [["a", "b", "c"]] and order == ["d-g2p"]
    assert scheduler.stats.batches_run == 1 and scheduler.stats.batched_jobs == 3
    assert all(r.run_s == results[0].run_s for r in results)  # the shared call's time


async def test_batches_hold_at_most_max_batch_and_a_batch_of_one_runs_the_job_itself() -> None:
    batcher = Batcher()
    scheduler = batching_scheduler(batcher, max_batch=2)
    gate, gate_task = await _blocked(scheduler)
    tasks = [asyncio.create_task(scheduler.submit(key, single(key), item=key)) for key in "abcde"]
    await asyncio.sleep(0)
    gate.release.set()
    results = await asyncio.gather(*tasks)
    await gate_task
    await scheduler.close()
    assert batcher.calls == [["a", "b"], ["c", "d"]]
    assert [r.value for r in results] == ["A", "B", "C", "D", "alone:e"]


async def test_the_best_ranked_pieces_fill_the_batch() -> None:
    batcher = Batcher()
    scheduler = FairScheduler(1, batching=Batching(batcher, 2, 0.0), clock=lambda: 100.0)
    gate, gate_task = await _blocked(scheduler)
    ahead = {"full": 5.0, "dry": 0.0, "low": 1.0}
    playouts = {}
    for key, seconds in ahead.items():
        playouts[key] = Playout()
        playouts[key].add(100.0, seconds)
    tasks = [asyncio.create_task(scheduler.submit(key, single(key), item=key, playout=playouts[key]))
             for key in ahead]
    first = asyncio.create_task(scheduler.submit("new", single("new"), item="new", first=True))
    await asyncio.sleep(0)
    gate.release.set()
    await asyncio.gather(gate_task, first, *tasks)
    await scheduler.close()
    assert batcher.calls == [["new", "dry"], ["low", "full"]]


async def test_a_lone_session_never_waits_for_the_window() -> None:
    batcher = Batcher()
    scheduler = batching_scheduler(batcher, window_s=30.0)
    result = await asyncio.wait_for(scheduler.submit("a", single("a"), item="a"), 5.0)
    await scheduler.close()
    assert result.value == "alone:a" and batcher.calls == []


async def test_a_short_batch_waits_for_an_active_session_within_the_window() -> None:
    batcher = Batcher()
    scheduler = batching_scheduler(batcher, max_batch=2, window_s=30.0)
    await scheduler.submit("b", single("b0"), item="b0")  # b is active: it just finished a piece
    a1 = asyncio.create_task(scheduler.submit("a", single("a1"), item="a1"))
    await asyncio.sleep(0.05)
    b1 = asyncio.create_task(scheduler.submit("b", single("b1"), item="b1"))
    results = await asyncio.wait_for(asyncio.gather(a1, b1), 5.0)  # full at 2: no waiting out the 30 s
    await scheduler.close()
    assert batcher.calls == [["a1", "b1"]] and [r.value for r in results] == ["A1", "B1"]


async def test_a_cancelled_piece_stays_out_of_the_batch_and_a_failure_reaches_every_member() -> None:
    calls: list[list[str]] = []

    def failing(items: Sequence[Any]) -> list[str]:
        calls.append(list(items))
        raise RuntimeError("CUDA out of memory")

    scheduler = FairScheduler(1, batching=Batching(failing, 8, 0.0))
    gate, gate_task = await _blocked(scheduler)
    token = CancelToken()
    dropped = asyncio.create_task(scheduler.submit("x", single("x"), token, item="x"))
    members = [asyncio.create_task(scheduler.submit(key, single(key), item=key)) for key in ("a", "b")]
    await asyncio.sleep(0)
    token.cancel()
    gate.release.set()
    await gate_task
    with pytest.raises(JobDropped):
        await dropped
    for task in members:
        with pytest.raises(RuntimeError, match="out of memory"):
            await task
    await scheduler.close()
    assert calls == [["a", "b"]]


def test_batching_needs_room_for_two() -> None:
    with pytest.raises(ValueError):
        Batching(Batcher(), 1, 0.01)


class Steps:
    """A generator whose second step blocks on the worker thread until released, recording what happened to it."""

    def __init__(self) -> None:
        self.in_step = threading.Event()
        self.release = threading.Event()
        self.closed = threading.Event()

    def __iter__(self) -> Any:
        try:
            yield "first"
            self.in_step.set()
            self.release.wait(10)
            yield "second"
            yield "third"
        finally:
            self.closed.set()


async def test_a_stepper_closed_while_a_worker_runs_its_step_closes_after_the_step() -> None:
    """The wedge of issue 23: a client left while a worker was running the next part of its first piece, and the
    event loop closed the generator under the worker ("generator already executing"); a step after that raised
    StopIteration into an asyncio future, which then never resolved. Forced here: close() lands mid-step."""
    scheduler = FairScheduler(workers=1)
    steps = Steps()
    stepper = Stepper(iter(steps))  # type: ignore[arg-type]
    assert (await scheduler.submit("s", stepper.step)).value == "first"
    second = asyncio.create_task(scheduler.submit("s", stepper.step))
    await asyncio.to_thread(steps.in_step.wait, 10)
    stepper.close()  # from the event loop, while the worker is inside the generator: must not raise
    assert not steps.closed.is_set()
    steps.release.set()
    assert (await asyncio.wait_for(second, 10)).value == "second"  # the step finishes and hands its value over
    assert steps.closed.is_set()  # then the step closed the generator
    with pytest.raises(JobDropped):  # a later step touches nothing
        await asyncio.wait_for(scheduler.submit("s", stepper.step), 10)
    assert (await asyncio.wait_for(scheduler.submit("other", lambda: "served"), 10)).value == "served"
    await scheduler.close()


async def test_a_stepper_closed_before_its_step_runs_drops_the_step() -> None:
    scheduler = FairScheduler(workers=1)
    steps = Steps()
    stepper = Stepper(iter(steps))  # type: ignore[arg-type]
    assert (await scheduler.submit("s", stepper.step)).value == "first"
    gate, gate_task = await _blocked(scheduler)
    queued = asyncio.create_task(scheduler.submit("s", stepper.step))
    await asyncio.sleep(0)
    stepper.close()
    stepper.close()  # idempotent
    assert steps.closed.is_set()
    gate.release.set()
    await gate_task
    with pytest.raises(JobDropped):
        await asyncio.wait_for(queued, 10)
    await scheduler.close()


@pytest.mark.parametrize("interleaving", range(40))
async def test_closing_at_any_moment_never_wedges_a_worker(interleaving: int) -> None:
    """Close from the event loop at 40 different moments around a running step (a thread sleeps `interleaving`
    hundred microseconds before closing): whatever the order, the worker stays free and nothing is logged."""
    scheduler = FairScheduler(workers=1)

    def parts() -> Any:
        for n in range(3):
            time.sleep(0.002)
            yield n

    stepper = Stepper(parts())
    step = asyncio.create_task(scheduler.submit("s", stepper.step))
    await asyncio.sleep(interleaving / 10_000)
    stepper.close()
    with contextlib.suppress(JobDropped):
        await asyncio.wait_for(step, 10)
    assert (await asyncio.wait_for(scheduler.submit("other", lambda: "served"), 10)).value == "served"
    assert scheduler.running == 0
    await scheduler.close()


async def test_a_job_raising_stop_iteration_fails_its_awaiter_and_frees_the_worker(
        scheduler: FairScheduler) -> None:
    def ended() -> str:
        raise StopIteration

    with pytest.raises(RuntimeError, match="StopIteration"):
        await asyncio.wait_for(scheduler.submit("s", ended), 10)
    assert (await asyncio.wait_for(scheduler.submit("s", lambda: "next"), 10)).value == "next"
