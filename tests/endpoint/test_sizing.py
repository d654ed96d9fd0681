"""Choosing inference workers and threads from the usable cores (`auto`) or the operator's numbers."""

from __future__ import annotations

import os

import pytest
from voicecli_endpoint import sizing
from voicecli_endpoint.sizing import choose, parse_count, usable_cpus


def test_auto_on_a_cpu_is_one_single_threaded_worker_per_core() -> None:
    sizes = choose(None, None, cpus=2)
    assert (sizes.workers, sizes.threads, sizes.workers_auto, sizes.threads_auto) == (2, 1, True, True)


def test_a_lone_piece_gets_every_core_when_threads_are_auto() -> None:
    assert choose(None, None, cpus=2).solo_threads == 2
    assert "2 for a lone piece" in choose(None, None, cpus=2).describe()
    assert choose(None, 1, cpus=2).solo_threads == 0  # the operator's thread count is kept
    assert choose(1, None, cpus=2).solo_threads == 0  # one worker already has every core
    assert choose(None, None, gpu=True, cpus=4).solo_threads == 0


def test_auto_on_a_gpu_is_one_worker_with_the_cores_as_threads() -> None:
    sizes = choose(None, None, gpu=True, cpus=4)
    assert (sizes.workers, sizes.threads) == (1, 4)


@pytest.mark.parametrize(("workers", "threads", "expected"), [(None, 2, (2, 2)), (2, None, (2, 2)), (3, 5, (3, 5)),
                                                               (None, 8, (1, 8))])
def test_one_given_size_decides_the_other(workers: int | None, threads: int | None,
                                          expected: tuple[int, int]) -> None:
    sizes = choose(workers, threads, cpus=4)
    assert (sizes.workers, sizes.threads) == expected
    assert "usable core" in sizes.describe()


def test_usable_cpus_follows_the_affinity_mask() -> None:
    assert usable_cpus() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("text", "expected"), [("auto", None), ("AUTO", None), (None, None), ("3", 3), (2, 2)])
def test_parse_count(text: str | int | None, expected: int | None) -> None:
    assert parse_count(text, "--workers") == expected


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_parse_count_rejects_with_the_option_name(text: str) -> None:
    with pytest.raises(ValueError, match="--threads"):
        parse_count(text, "--threads")


def test_batching_is_on_by_auto_only_for_a_batching_engine_on_a_gpu() -> None:
    assert sizing.choose_batch(None, gpu=True, engine_batches=True) == sizing.GPU_MAX_BATCH
    assert sizing.choose_batch(None, gpu=False, engine_batches=True) == 1
    assert sizing.choose_batch(None, gpu=True, engine_batches=False) == 1
    assert sizing.choose_batch(4, gpu=False, engine_batches=True) == 4  # asked for explicitly
    assert sizing.choose_batch(4, gpu=True, engine_batches=False) == 1  # the onnx engine cannot
