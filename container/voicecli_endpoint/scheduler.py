"""Inference shared between sessions by N parallel workers, serving first what a listener needs next.

Why N workers: with one inference at a time, total throughput stayed flat from one session to four while the
second core idled. An ONNX Runtime session accepts concurrent `run()` calls (and releases the GIL while it runs), so
N worker threads over one shared engine keep N cores busy; each inference then uses the intra-op threads the engine
was built with (see `voicecli_endpoint.sizing` for how both are chosen).

Which queued job a free worker takes (`_pick`), best first:
  1. the first piece of a turn (`first=True`): a listener is waiting in silence for the answer to start;
  2. then the session whose listener is closest to running dry: the least audio buffered ahead of real time, read
     from the session's `Playout` (a session without one counts as dry);
  3. round robin as the tie break: the session served least recently (a new session joins at the back).
Within one session jobs run in the order they were submitted. A job whose cancel token is set, whose session was
dropped, or whose awaiter went away is dropped before it runs, whichever worker would have taken it; a job that is
already running finishes (inference cannot be interrupted) and its result is discarded.

Batching (`Batching`, on only for an engine that gains from it: the torch engine on a GPU, see
voicecli_endpoint.engines.torch_engine): a job submitted with an `item` can share one engine call with other such
jobs. A worker that picks one keeps picking, by the same rules, the best queued jobs that have an item, up to
`max_batch`; while the batch is short it waits up to `window_s` after it started gathering for more to arrive, but
only while another session could plausibly send one (it has work queued or running, or finished a job within
`ACTIVE_S`): a lone session never waits. On a GPU the sessions that share a batch get their results together and
send their next pieces together, so after the first batch they arrive within a few milliseconds of each other.
A batch of one runs the job's own function, exactly as without batching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Generator, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from voicecli.wire.playout import Playout

log = logging.getLogger(__name__)

ACTIVE_S = 1.0
"""A session that finished a job this recently is still sending pieces: a short batch waits for it (see above)."""


class JobDropped(Exception):
    """The job was cancelled (its token) or its session went away before it could run or finish."""


class CancelToken:
    """Set once, read by the scheduler before and after each job; one per request."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Stepper[T]:
    """A generator advanced one `step` per scheduler job, and closed safely from any thread at any time.

    Why: a piece decoded in parts is a generator whose steps run on worker threads while its consumer lives on the
    event loop. When the consumer goes away (a barge-in, a closed connection) it must close the generator, but a
    worker may be executing it at that very moment: `generator.close()` then raises "generator already executing",
    and a step run after a close raises StopIteration, which no asyncio future can carry. Here the generator is only
    ever run by one thread at a time by construction: `close` during a step marks it closed and the step closes it
    as it finishes; a step after `close` raises JobDropped without touching it.
    """

    def __init__(self, generator: Generator[T]) -> None:
        self._generator = generator
        self._lock = threading.Lock()
        """Guards the two flags and every `close()` of the generator (a step runs it outside the lock)."""
        self._stepping = False
        self._closed = False

    def step(self) -> T:
        """The generator's next value. Raises JobDropped once closed, RuntimeError if it ends without one."""
        with self._lock:
            if self._closed:
                raise JobDropped
            if self._stepping:
                raise RuntimeError("a Stepper is stepped by one job at a time")
            self._stepping = True
        try:
            return next(self._generator)
        except StopIteration:
            raise RuntimeError("the generator ended before its last step") from None
        finally:
            with self._lock:
                self._stepping = False
                if self._closed:  # closed while this step ran: the close is ours to do
                    self._generator.close()

    def close(self) -> None:
        """Close the generator now, or as soon as the step running it returns (idempotent, any thread)."""
        with self._lock:
            self._closed = True
            if not self._stepping:
                self._generator.close()


def _call[T](fn: Callable[[], T]) -> T:
    """Run a job's function on a worker thread. A StopIteration becomes a RuntimeError: asyncio cannot set
    StopIteration on a future, and the one it would have been set on would then never resolve."""
    try:
        return fn()
    except StopIteration as exc:
        raise RuntimeError(f"a scheduler job raised StopIteration: {exc!r}") from None


@dataclass(frozen=True)
class Timed[T]:
    """A job's result with how long it waited for a worker and how long it ran."""

    value: T
    queue_wait_s: float
    run_s: float


@dataclass(frozen=True)
class Batching:
    """Combine jobs that carry an item into one call of `run` (items in, results in the same order out)."""

    run: Callable[[Sequence[Any]], Sequence[Any]]
    max_batch: int
    window_s: float

    def __post_init__(self) -> None:
        if self.max_batch < 2:
            raise ValueError(f"a batch holds at least 2 jobs, got max_batch={self.max_batch}")
        if self.window_s < 0:
            raise ValueError(f"window_s must be 0 or more, got {self.window_s}")


@dataclass
class _Job:
    key: Hashable
    fn: Callable[[], Any]
    future: asyncio.Future[Timed[Any]]
    token: CancelToken | None
    enqueued: float
    first: bool
    item: Any = None
    """What `Batching.run` takes for this job (None: the job never shares a call)."""

    @property
    def dead(self) -> bool:
        """Nobody wants the result any more: cancelled, or its awaiter went away."""
        return self.future.done() or (self.token is not None and self.token.cancelled)


@dataclass
class _Lane:
    """One session's queue, and what ranks it against the others."""

    served: int
    """Value of the scheduler's pick counter when this session was last served (or joined)."""
    jobs: deque[_Job] = field(default_factory=deque)
    playout: Playout | None = None
    last_done: float = float("-inf")
    """When a job of this session last finished (scheduler clock)."""


@dataclass
class SchedulerStats:
    jobs_run: int = 0
    jobs_dropped: int = 0
    busy_s: float = 0.0
    """Seconds of worker time spent running jobs, summed over workers."""
    first_jobs_run: int = 0
    batches_run: int = 0
    """Engine calls that served more than one job."""
    batched_jobs: int = 0
    """Jobs served by those calls."""


class FairScheduler:
    """N workers; first pieces of turns first, then the session closest to running dry, then round robin."""

    def __init__(self, workers: int = 1, *, clock: Callable[[], float] = time.monotonic,
                 batching: Batching | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.batching = batching
        self.stats = SchedulerStats()
        self._clock = clock
        """The clock the sessions' Playouts are kept on."""
        self._lanes: dict[Hashable, _Lane] = {}
        self._picks = 0
        self._running = 0
        self._running_keys: Counter[Hashable] = Counter()
        self._wakeup = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="inference")
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the workers on the running event loop (idempotent)."""
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(self._work(), name=f"inference-worker-{n}") for n in range(self.workers)]

    async def close(self) -> None:
        """Stop the workers, fail every queued job, and release the threads."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        for key in list(self._lanes):
            self.drop_session(key)
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def queued(self) -> int:
        return sum(len(lane.jobs) for lane in self._lanes.values())

    @property
    def sessions_waiting(self) -> int:
        return sum(1 for lane in self._lanes.values() if lane.jobs)

    @property
    def running(self) -> int:
        """Jobs on a worker right now."""
        return self._running

    async def submit[T](self, key: Hashable, fn: Callable[[], T], token: CancelToken | None = None, *,
                        first: bool = False, playout: Playout | None = None, item: Any = None) -> Timed[T]:
        """Run `fn` on a worker when `key`'s turn comes. Raises JobDropped if cancelled first.

        `first`: this job makes the first audio of a turn (ranked ahead of everything else). `playout`: the
        session's listener, whose buffered audio ranks the session (kept for the following jobs too). `item`:
        what `Batching.run` takes to do the same as `fn` together with other jobs (ignored without batching).
        """
        if token is not None and token.cancelled:
            raise JobDropped
        self.start()
        future: asyncio.Future[Timed[T]] = asyncio.get_running_loop().create_future()
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(served=self._picks)
        if playout is not None:
            lane.playout = playout
        lane.jobs.append(_Job(key, fn, future, token, time.perf_counter(), first,
                              item if self.batching is not None else None))
        self._wakeup.set()
        return await future

    def run_now[T](self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run `fn` on a worker thread outside the queue (start-up warm-up, before any session)."""
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def drop_session(self, key: Hashable) -> int:
        """Fail every queued job of `key` at once and forget the session (it ended). Returns how many."""
        lane = self._lanes.pop(key, None)
        if lane is None:
            return 0
        return sum(self._fail(job) for job in lane.jobs)

    def drop_cancelled(self, key: Hashable) -> int:
        """Fail the queued jobs of `key` whose token is cancelled, so their awaiters return immediately."""
        lane = self._lanes.get(key)
        if lane is None:
            return 0
        dropped = [job for job in lane.jobs if job.token is not None and job.token.cancelled]
        lane.jobs = deque(job for job in lane.jobs if not (job.token is not None and job.token.cancelled))
        return sum(self._fail(job) for job in dropped)

    def _fail(self, job: _Job) -> int:
        if job.future.done():
            return 0
        job.future.set_exception(JobDropped())
        self.stats.jobs_dropped += 1
        return 1

    def _discard(self, job: _Job) -> None:
        """A dead job leaves the queue without running."""
        if job.future.done():  # its awaiter was cancelled (session gone)
            self.stats.jobs_dropped += 1
        else:
            self._fail(job)

    def _pick(self, *, batchable: bool = False) -> _Job | None:
        """The best queued job by the rules in the module docstring; dead jobs met on the way are dropped.

        `batchable`: only a job that carries a batch item (a session whose next job has none is passed over).
        """
        now = self._clock()
        best: _Lane | None = None
        best_rank: tuple[bool, float, int] | None = None
        for lane in self._lanes.values():
            while lane.jobs and lane.jobs[0].dead:
                self._discard(lane.jobs.popleft())
            if not lane.jobs or (batchable and lane.jobs[0].item is None):
                continue
            ahead = lane.playout.ahead_s(now) if lane.playout is not None else 0.0
            rank = (not lane.jobs[0].first, ahead, lane.served)
            if best_rank is None or rank < best_rank:
                best, best_rank = lane, rank
        if best is None:
            return None
        self._picks += 1
        best.served = self._picks
        return best.jobs.popleft()

    def _others_may_join(self, batch: list[_Job]) -> bool:
        """Whether a session outside `batch` could send a batchable job soon (see the module docstring)."""
        now, inside = self._clock(), {job.key for job in batch}
        return any(lane.jobs or self._running_keys[key] or now - lane.last_done < ACTIVE_S
                   for key, lane in self._lanes.items() if key not in inside)

    async def _gather(self, job: _Job, batching: Batching) -> list[_Job]:
        """`job` and the best batchable jobs queued now or arriving within the window, up to `max_batch`."""
        batch = [job]
        deadline = time.perf_counter() + batching.window_s
        while len(batch) < batching.max_batch:
            more = self._pick(batchable=True)
            if more is not None:
                batch.append(more)
                continue
            remaining = deadline - time.perf_counter()
            if remaining <= 0 or not self._others_may_join(batch):
                break
            self._wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), remaining)
        return batch

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = self._pick()
            if job is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = [job]
            if self.batching is not None and job.item is not None:
                batch = await self._gather(job, self.batching)
            await self._run(loop, batch)

    async def _run(self, loop: asyncio.AbstractEventLoop, batch: list[_Job]) -> None:
        """Run one job (its own function) or a batch (one `Batching.run` call), and hand out the results."""
        started = time.perf_counter()
        self._running += len(batch)
        self._running_keys.update(job.key for job in batch)
        try:
            if len(batch) == 1:
                values: Sequence[Any] = [await loop.run_in_executor(self._executor, _call, batch[0].fn)]
            else:
                assert self.batching is not None
                run = partial(self.batching.run, [job.item for job in batch])
                values = await loop.run_in_executor(self._executor, _call, run)
                if len(values) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} returned {len(values)} results")
        except Exception as exc:  # handed to the awaiters, who report it
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(exc)
            return
        finally:
            self._running -= len(batch)
            for job in batch:
                self._running_keys[job.key] -= 1
                if self._running_keys[job.key] <= 0:
                    del self._running_keys[job.key]
            self.stats.busy_s += time.perf_counter() - started
            done = self._clock()
            for job in batch:
                if (lane := self._lanes.get(job.key)) is not None:
                    lane.last_done = done
        ran = time.perf_counter() - started
        self.stats.jobs_run += len(batch)
        if len(batch) > 1:
            self.stats.batches_run += 1
            self.stats.batched_jobs += len(batch)
        for job, value in zip(batch, values, strict=True):
            self.stats.first_jobs_run += job.first
            if job.dead:
                self._discard(job)
                continue
            job.future.set_result(Timed(value, started - job.enqueued, ran))
