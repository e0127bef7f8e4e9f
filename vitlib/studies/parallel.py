"""Independent runs side by side (issue: a sweep's runs cost compute, and they do not depend on each other).

`run_tasks(tasks, jobs)` calls every task (a function of nothing that returns a dict of numbers) and yields the
results in the tasks' order. With jobs > 1 the tasks run in `jobs` worker processes, forked from this one so that a
task may be any closure (a notebook's lambda included), each worker with one PyTorch thread. A task that seeds itself
(as `Experiment.train` and `run_fractions` do: torch.manual_seed(seed) and cfg.seed) gives bit-identical numbers in a
worker and in this process, so the choice of `jobs` changes the wall time only.

Two kinds of run must stay out of a worker: one that keeps what it made somewhere other than its returned metrics (a
model stored in a notebook's dict stays in the worker), and one whose numbers depend on the runs before it in the same
process (a shared generator, a shared module whose state an earlier run changed): in a worker it starts from the
process as it was at the fork, and gives other numbers.

On a GPU the workers share the device: each worker opens CUDA itself, so CUDA must not be in use in this process
before the workers start (a forked CUDA context does not work); start the sweep before moving anything to the GPU.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor

import torch

_TASKS: Sequence[Callable[[], dict]] = ()  # set before the workers fork; they find their task here by index


def default_jobs() -> int:
    """How many runs at a time by default: one per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_jobs(jobs: int) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a whole number of runs at a time, at least 1, got {jobs!r}.")
    return jobs


def _timed(task: Callable[[], dict]) -> dict:
    start = time.perf_counter()
    out = dict(task())
    out.setdefault("wall_s", time.perf_counter() - start)
    return out


def _run_index(i: int) -> dict:
    return _timed(_TASKS[i])


def _one_thread(threads: int) -> None:
    torch.set_num_threads(threads)


def run_tasks(tasks: Sequence[Callable[[], dict]], jobs: int = 1, threads: int = 1) -> Iterator[dict]:
    """Each task's result (its dict, with `wall_s` added when it has none), in the order of `tasks`; `jobs` worker
    processes of `threads` PyTorch threads each, or this process alone when jobs is 1. A task's error stops the
    rest and is raised here, after the results of the tasks before it."""
    global _TASKS
    check_jobs(jobs)
    tasks = list(tasks)
    if jobs == 1 or len(tasks) <= 1:
        for task in tasks:
            yield _timed(task)
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        raise RuntimeError(
            "CUDA is already in use in this process, and worker processes forked from it cannot use it: start the "
            "runs side by side before anything goes to the GPU (restart the kernel), or pass jobs=1."
        )
    _TASKS = tasks
    pool = ProcessPoolExecutor(
        min(jobs, len(tasks)), multiprocessing.get_context("fork"), initializer=_one_thread, initargs=(threads,)
    )
    try:
        futures = [pool.submit(_run_index, i) for i in range(len(tasks))]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _TASKS = ()
