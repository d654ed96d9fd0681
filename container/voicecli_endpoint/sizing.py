"""How many inference workers, and how many intra-op threads each, for the machine the endpoint runs on.

Why workers before threads: Kokoro's pieces are short (a clause or a sentence), and splitting one short inference
over several intra-op threads gains little (synchronisation per operator), while separate sessions' inferences are
independent. So on a CPU `auto` gives one worker per usable core with one thread each: one session gets one core,
N sessions get N. A GPU runs kernels one stream at a time, so there `auto` gives one worker and lets it use the
CPU cores for its own host-side work. Both are overridable (`serve --workers N --threads M`); the product should
stay at or below the usable cores, or the workers preempt each other.

A lone inference still gets every core: with `auto` threads and several workers, the ONNX engine keeps a second
session whose intra-op pool spans all usable cores and runs a piece on it whenever no other piece is running (see
`solo_threads`). Measured on 2 cores: a 6-word first sentence takes ~600 ms on one thread and ~375 ms on two, and a
single user's turn is exactly that case (the local endpoint of `voicecli chat`), while concurrent sessions still get
one core each.

Batching (`choose_batch`): several sessions' pieces in one engine call. It pays only where a call's cost is mostly
fixed overhead (kernel launches on a GPU) and only for an engine that implements it (the torch engine), so `auto`
turns it on for the torch engine on a GPU (`GPU_MAX_BATCH` pieces, gathered for up to `BATCH_WINDOW_MS`) and off
everywhere else; on a CPU parallel workers already use every core. `serve --max-batch N` overrides it.

Usable cores come from the scheduler affinity (what a container's cpuset or `taskset` allows), not the host's count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from voicecli.wire.server_options import BATCH_WINDOW_MS, GPU_MAX_BATCH

__all__ = ["AUTO", "BATCH_WINDOW_MS", "GPU_MAX_BATCH", "Parallelism", "choose", "choose_batch", "parse_count",
           "usable_cpus"]

AUTO = "auto"



def usable_cpus() -> int:
    """Cores this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def parse_count(text: str | int | None, what: str) -> int | None:
    """`auto`/None -> None; a whole number >= 1 -> itself; anything else -> ValueError naming `what`."""
    if text is None or (isinstance(text, str) and text.strip().lower() == AUTO):
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} must be 'auto' or a whole number, not {text!r}") from None
    if value < 1:
        raise ValueError(f"{what} must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class Parallelism:
    """The chosen sizes, and whether each was chosen automatically (reported by /ping and /stats)."""

    workers: int
    threads: int
    cpus: int
    workers_auto: bool
    threads_auto: bool
    solo_threads: int = 0
    """Intra-op threads for a piece that runs alone (0: the same as `threads`)."""

    def describe(self) -> str:
        def tag(auto: bool) -> str:
            return " (auto)" if auto else ""

        solo = f", {self.solo_threads} for a lone piece" if self.solo_threads > self.threads else ""
        return (f"{self.workers} worker(s){tag(self.workers_auto)} x {self.threads} thread(s)"
                f"{tag(self.threads_auto)}{solo} on {self.cpus} usable core(s)")


def choose(workers: int | None, threads: int | None, *, gpu: bool = False, cpus: int | None = None) -> Parallelism:
    """Fill in what is None (`auto`) from the usable cores; see the module docstring for the rule."""
    cores = usable_cpus() if cpus is None else max(1, cpus)
    if workers is None:
        workers = 1 if gpu else max(1, cores // (threads or 1))
        workers_auto = True
    else:
        workers_auto = False
    if threads is None:
        threads = max(1, cores // workers)
        threads_auto = True
    else:
        threads_auto = False
    solo = cores if threads_auto and not gpu and workers > 1 and cores > threads else 0
    return Parallelism(workers, threads, cores, workers_auto, threads_auto, solo)


def choose_batch(max_batch: int | None, *, gpu: bool, engine_batches: bool) -> int:
    """Pieces per engine call (1: no batching); None is `auto`. An engine that cannot batch always gets 1."""
    if not engine_batches:
        return 1
    if max_batch is None:
        return GPU_MAX_BATCH if gpu else 1
    return max_batch
