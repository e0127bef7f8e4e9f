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

Where a GPU is, PyTorch refuses to work in a process forked after its parent started the CUDA driver (anything moved
to the GPU; also the first backward pass of any model, even on the CPU: the autograd engine counts the GPUs) or ran a
backward pass (its autograd threads do not survive a fork), whatever device the workers' runs use; both were
measured on an H100. A sweep whose forked workers are refused so runs its remaining runs here, one after another,
with a warning: the same numbers, without the speed-up. Forked workers on a GPU were measured to work, and to be
fast, in a process that had trained nothing before the sweep.

`start="spawn"` starts fresh interpreters instead, and sends each task pickled by cloudpickle, which also pickles
closures and a notebook's functions: no refusal, whatever this process did. A spawned worker starts from the imported
modules, not from this process's state: its runs must not depend on global settings made here (e.g.
`torch.backends.cuda.matmul.allow_tf32`), and what they capture is copied to each worker (a data set once per run).
A task that cannot be pickled sends the runs to forked workers, with a warning.

`start="forkserver"` sends them the same way to workers forked from a server process: a fresh interpreter that
imports torch and vitlib once, the first time a sweep asks for it, and stays for the kernel's life. Its workers are as
unaffected by this process as spawned ones, but do not each import torch: a notebook pays for that once, not at
every sweep (on the 2-core CPU, 8 runs took 0.62x the time of one worker at 2 spawned workers, 0.68x at the first
forkserver sweep and 0.61x at the next, against 0.53x forked: `benchmarks/README.md`). Both are checked on the CPU
(the same numbers as one after another); on a GPU they are not measured yet (needs a GPU), so fork stays the
default. The environment variable VITLIB_START (fork, spawn or forkserver) changes the default of every sweep, e.g.
`VITLIB_START=forkserver papermill ...` for a notebook whose parameters do not name it.

Importing vitlib makes `torch.cuda.is_available()` ask NVML, which leaves the driver alone, and `device_name` reads a
GPU's name through nvidia-smi, so neither starts CUDA.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings
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


STARTS = ("fork", "spawn", "forkserver")  # how the workers start (see the module's text)
START_VARIABLE = "VITLIB_START"  # the default `start` of every sweep (e.g. for a notebook run by papermill on a GPU)
PRELOAD = ["torch", "vitlib", "vitlib.train", "course.experiments"]  # imported once by the forkserver


def check_start(start: str | None) -> str:
    """How the workers start: `start` when given, else $VITLIB_START when it is set, else 'fork'."""
    given = start is not None
    start = start if given else os.environ.get(START_VARIABLE) or "fork"
    if start in STARTS:
        return start
    if given:
        raise ValueError(f"start must be one of {', '.join(map(repr, STARTS))} (how the workers start), got {start!r}.")
    raise ValueError(
        f"${START_VARIABLE} is {start!r}: set it to one of {', '.join(STARTS)} (how a sweep's workers start), or "
        f"unset it for fork."
    )


def _timed(task: Callable[[], dict]) -> dict:
    start = time.perf_counter()
    out = dict(task())
    out.setdefault("wall_s", time.perf_counter() - start)
    return out


def _run_index(i: int) -> dict:
    return _timed(_TASKS[i])


def _one_thread(threads: int) -> None:
    torch.set_num_threads(threads)


FORK_REFUSALS = (
    "Cannot re-initialize CUDA in forked subprocess",  # this process's PyTorch had started CUDA
    "CUDA error: initialization error",  # the driver had been started here (a backward pass does, where a GPU is)
    "Unable to handle autograd's threading in combination with fork-based multiprocessing",  # a backward pass here
)


def fork_refused(error: BaseException) -> bool:
    """Whether a worker's error is PyTorch refusing a process forked after this one started CUDA or autograd."""
    return any(text in str(error) for text in FORK_REFUSALS)


def _run_pickled(blob: bytes) -> dict:
    import cloudpickle

    return _timed(cloudpickle.loads(blob))


def run_tasks(
    tasks: Sequence[Callable[[], dict]], jobs: int = 1, threads: int = 1, start: str | None = None
) -> Iterator[dict]:
    """Each task's result (its dict, with `wall_s` added when it has none), in the order of `tasks`; `jobs` worker
    processes of `threads` PyTorch threads each, or this process alone when jobs is 1. `start`: how the workers
    start, 'fork' (copies of this process), 'spawn' (fresh interpreters) or 'forkserver' (copies of a fresh
    interpreter that imported torch and vitlib once; see the module's text); None: fork unless $VITLIB_START names
    another. A task's error stops the rest and is raised here, after the results of the tasks before it. Tasks that
    cannot be pickled for spawned or forkserver workers go to forked ones; where PyTorch refuses forked workers (see
    the module's text), the remaining tasks run here, one after another; both with a warning."""
    check_jobs(jobs)
    start = check_start(start)
    tasks = list(tasks)
    if jobs == 1 or len(tasks) <= 1:
        for task in tasks:
            yield _timed(task)
        return
    if start != "fork":
        blobs = _pickled(tasks, start)
        if blobs is not None:
            yield from _fresh(blobs, jobs, threads, start)
            return
    yield from _forked(tasks, jobs, threads)


def _pickled(tasks: list, start: str) -> list[bytes] | None:
    import cloudpickle

    try:
        return [cloudpickle.dumps(task) for task in tasks]
    except Exception as error:  # a closure over something that does not pickle (a generator, a lock, a file)
        warnings.warn(
            f"The runs cannot be sent to {start} workers ({type(error).__name__}: {error}); they go to forked "
            f"workers instead.",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _fresh(blobs: list[bytes], jobs: int, threads: int, start: str) -> Iterator[dict]:
    """The pickled tasks in spawned workers, or in workers forked from the forkserver (started with PRELOAD)."""
    context = multiprocessing.get_context(start)
    if start == "forkserver":
        context.set_forkserver_preload(PRELOAD)  # read when the server starts; a running server keeps what it has
    with ProcessPoolExecutor(min(jobs, len(blobs)), context, initializer=_one_thread, initargs=(threads,)) as pool:
        futures = [pool.submit(_run_pickled, blob) for blob in blobs]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def _forked(tasks: list, jobs: int, threads: int) -> Iterator[dict]:
    global _TASKS
    _TASKS = tasks
    pool = ProcessPoolExecutor(
        min(jobs, len(tasks)), multiprocessing.get_context("fork"), initializer=_one_thread, initargs=(threads,)
    )
    done = 0
    try:
        futures = [pool.submit(_run_index, i) for i in range(len(tasks))]
        for future in futures:
            try:
                result = future.result()
            except Exception as error:
                if not fork_refused(error):
                    raise
                warnings.warn(
                    f"The workers cannot run: PyTorch refuses a process forked after this one started CUDA or, "
                    f"where a GPU is, ran a backward pass. The remaining {len(tasks) - done} runs go here, one after "
                    f"another, with the same numbers. For runs side by side, give workers that start afresh runs that "
                    f"pickle (start='forkserver' or 'spawn', or the environment variable VITLIB_START=forkserver "
                    f"before the kernel starts), or restart the kernel and start the sweep before anything trains.",
                    RuntimeWarning,
                    stacklevel=3,
                )
                break
            yield result
            done += 1
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _TASKS = ()
    for task in tasks[done:]:
        yield _timed(task)
