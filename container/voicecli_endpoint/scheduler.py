"""One inference at a time on the engine, shared FAIRLY between sessions.

A Kokoro model is not thread-safe and a CPU has no spare cores, so jobs run one by one on a single worker
thread (the event loop stays free to receive and send). Jobs are small (one sentence or clause each), and the
next job is taken round-robin across sessions: a session with a long text cannot starve another one's first
sentence. A job whose cancel token is set, or whose session is dropped, is skipped without running; a job that
is already running finishes (inference cannot be interrupted) and its result is discarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class JobDropped(Exception):
    """The job was cancelled (its token) or its session went away before it could run or finish."""


class CancelToken:
    """Set once, read by the scheduler between jobs; one per request."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(frozen=True)
class Timed[T]:
    """A job's result with how long it waited for the engine and how long it ran."""

    value: T
    queue_wait_s: float
    run_s: float


@dataclass
class _Job:
    fn: Callable[[], Any]
    future: asyncio.Future[Timed[Any]]
    token: CancelToken | None
    enqueued: float


@dataclass
class SchedulerStats:
    jobs_run: int = 0
    jobs_dropped: int = 0
    busy_s: float = 0.0


@dataclass
class FairScheduler:
    """Round-robin across session keys; FIFO within a session; one job running at a time."""

    stats: SchedulerStats = field(default_factory=SchedulerStats)
    _queues: dict[Hashable, deque[_Job]] = field(default_factory=dict)
    _turns: deque[Hashable] = field(default_factory=deque)
    _wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    _executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
    )
    _worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the worker on the running event loop (idempotent)."""
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="inference-scheduler")

    async def close(self) -> None:
        """Stop the worker, fail every queued job, and release the thread."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        for key in list(self._queues):
            self.drop_session(key)
        self._executor.shutdown(wait=False, cancel_futures=True)

    @property
    def queued(self) -> int:
        return sum(len(jobs) for jobs in self._queues.values())

    @property
    def sessions_waiting(self) -> int:
        return len(self._queues)

    async def submit[T](self, key: Hashable, fn: Callable[[], T], token: CancelToken | None = None) -> Timed[T]:
        """Run `fn` on the inference thread when `key`'s turn comes. Raises JobDropped if cancelled first."""
        if token is not None and token.cancelled:
            raise JobDropped
        self.start()
        future: asyncio.Future[Timed[T]] = asyncio.get_running_loop().create_future()
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self._turns.append(key)
        queue.append(_Job(fn, future, token, time.perf_counter()))
        self._wakeup.set()
        return await future

    def run_now[T](self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run `fn` on the inference thread outside the fair queue (start-up warm-up, before any session)."""
        return asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def drop_session(self, key: Hashable) -> int:
        """Fail every queued job of `key` at once (a disconnect frees its slots). Returns how many."""
        jobs = self._queues.pop(key, None)
        if not jobs:
            return 0
        with contextlib.suppress(ValueError):
            self._turns.remove(key)
        return sum(self._fail(job) for job in jobs)

    def drop_cancelled(self, key: Hashable) -> int:
        """Fail the queued jobs of `key` whose token is cancelled, so their awaiters return immediately."""
        jobs = self._queues.get(key)
        if not jobs:
            return 0
        keep = deque(job for job in jobs if not (job.token is not None and job.token.cancelled))
        dropped = [job for job in jobs if job.token is not None and job.token.cancelled]
        if keep:
            self._queues[key] = keep
        else:
            del self._queues[key]
            with contextlib.suppress(ValueError):
                self._turns.remove(key)
        return sum(self._fail(job) for job in dropped)

    def _fail(self, job: _Job) -> int:
        if job.future.done():
            return 0
        job.future.set_exception(JobDropped())
        self.stats.jobs_dropped += 1
        return 1

    def _next(self) -> _Job | None:
        while self._turns:
            key = self._turns.popleft()
            queue = self._queues.get(key)
            if not queue:
                self._queues.pop(key, None)
                continue
            job = queue.popleft()
            if queue:
                self._turns.append(key)  # back of the line: the other sessions go first
            else:
                del self._queues[key]
            return job
        return None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            job = self._next()
            if job is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            if job.future.done():  # its awaiter was cancelled (session gone)
                self.stats.jobs_dropped += 1
                continue
            if job.token is not None and job.token.cancelled:
                self._fail(job)
                continue
            started = time.perf_counter()
            try:
                value = await loop.run_in_executor(self._executor, job.fn)
            except Exception as exc:  # handed to the awaiter, who reports it
                if not job.future.done():
                    job.future.set_exception(exc)
                continue
            finally:
                self.stats.busy_s += time.perf_counter() - started
            self.stats.jobs_run += 1
            if job.future.done():
                continue
            if job.token is not None and job.token.cancelled:
                self._fail(job)
                continue
            job.future.set_result(Timed(value, started - job.enqueued, time.perf_counter() - started))
