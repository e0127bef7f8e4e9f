"""Runs side by side (course.parallel, Experiment.batch): the same numbers as one after another."""

import dataclasses
import os

import pytest
import torch

from course.experiments import Experiment
from course.parallel import check_jobs, fork_refused, run_tasks
from course.runs import train_run
from vitlib import create_model
from vitlib.train import TrainConfig

CFG = TrainConfig(
    dataset="fashion-mnist-mini", model="ViT-Micro/7", epochs=1, batch_size=128, subset=256, device="cpu"
)  # on the CPU also where a GPU is: this process must not start CUDA before the workers fork


def sweep(jobs: int, out=None) -> Experiment:
    exp = Experiment("sweep", out, jobs=jobs)
    with exp.batch():
        for lr in (1e-3, 3e-3):
            exp.train(
                f"lr={lr:g}",
                dataclasses.replace(CFG, lr=lr),
                seeds=[0, 1],
                model=lambda seed: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1),
                lr=lr,
            )
    return exp


def numbers(rows: list[dict]) -> list[dict]:
    """The rows without what differs between two runs of the same numbers: times, and the process they ran in."""
    return [{k: v for k, v in r.items() if k not in ("wall_s", "train_time_s", "pid")} for r in rows]


def test_two_workers_give_bit_identical_rows_in_the_same_order(one_thread, tmp_path):
    two, one = sweep(2, tmp_path), sweep(1)  # workers first: where a GPU is, a backward pass here rules them out
    assert [(r["condition"], r["seed"]) for r in two.rows] == [("lr=0.001", 0), ("lr=0.001", 1)] + [
        ("lr=0.003", 0),
        ("lr=0.003", 1),
    ]
    assert numbers(two.rows) == numbers(one.rows)  # exact equality of every float: train loss, accuracy, epochs, params
    assert len({r["train_loss"] for r in one.rows}) == 4  # four different runs, not one number four times
    assert (tmp_path / "sweep.json").exists() and (tmp_path / "sweep.csv").exists()


def test_runs_started_in_a_batch_fill_their_lists_when_it_ends():
    exp = Experiment("b", jobs=2)
    with exp.batch():
        rows = exp.run("square", lambda seed: {"value": float(seed * seed), "pid": os.getpid()}, seeds=[1, 2, 3])
        assert rows == [] and exp.rows == []
    assert [r["value"] for r in rows] == [1.0, 4.0, 9.0] and exp.rows == rows
    assert all(r["pid"] != os.getpid() for r in rows)  # they ran in worker processes
    assert all(r["wall_s"] >= 0 for r in rows)


def test_a_failing_run_keeps_the_rows_before_it_and_says_what_failed(tmp_path):
    def fn(seed):
        if seed == 2:
            raise ValueError("seed 2 diverged")
        return {"value": float(seed)}

    exp = Experiment("f", tmp_path, jobs=2)
    with pytest.raises(ValueError, match="seed 2 diverged"):
        with exp.batch():
            exp.run("c", fn, seeds=[0, 1, 2, 3])
    assert [r["seed"] for r in exp.rows] == [0, 1]
    assert '"seed": 1' in (tmp_path / "f.json").read_text()


def test_batches_do_not_nest_and_jobs_are_checked():
    exp = Experiment("n", jobs=1)
    with pytest.raises(RuntimeError, match="nest"):
        with exp.batch():
            with exp.batch():
                pass
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="jobs"):
            check_jobs(bad)
    assert list(run_tasks([lambda: {"a": 1}], jobs=4))[0]["a"] == 1


def test_workers_use_one_thread_each():
    results = list(run_tasks([lambda: {"threads": torch.get_num_threads()}] * 2, jobs=2))
    assert [r["threads"] for r in results] == [1, 1]


def test_the_benchmark_readme_quotes_the_measured_sweep():
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    m = json.loads((root / "results" / "reference" / "sweep_parallel.json").read_text())
    row = (
        f"| {m['runs']} | {m['steps']} | {m['seconds_1_worker']:.1f} s | {m['seconds_2_workers']:.1f} s | "
        f"{m['ratio']:.3f}x | {'yes' if m['identical'] else 'NO'} |"
    )
    assert row in (root / "benchmarks" / "README.md").read_text()
    assert m["identical"] and m["ratio"] <= 0.55  # the goal: two workers at most 0.55x the time of one
    for start in ("fork", "spawn", "forkserver"):  # how the workers start, on the CPU
        m = json.loads((root / "results" / "reference" / f"sweep_parallel_start_{start}.json").read_text())
        row = f"| {start} | {m['runs']} | {m['steps']} | {m['seconds_1_worker']:.1f} s | {m['seconds_2_workers']:.1f} s"
        assert row in (root / "benchmarks" / "README.md").read_text() and m["identical"] and m["start"] == start
    for jobs in (8, 16):  # on an H100
        g = json.loads((root / "results" / "gpu" / f"sweep_parallel_{jobs}.json").read_text())
        row = (
            f"| {g['runs']} | {g['steps']} | {g['seconds_1_worker']:.1f} s | {jobs} | "
            f"{g[f'seconds_{jobs}_workers']:.1f} s | {g['ratio']:.3f}x | {'yes' if g['identical'] else 'NO'} |"
        )
        assert row in (root / "benchmarks" / "README.md").read_text() and "H100" in g["device"]
        assert row in (root / "results" / "gpu" / "README.md").read_text()


def test_outside_a_batch_runs_stay_in_this_process_whatever_jobs():
    kept = {}
    exp = Experiment("outside", jobs=2)
    exp.run("c", lambda seed: kept.setdefault(seed, {"pid": os.getpid()}), seeds=[0, 1])
    assert sorted(kept) == [0, 1] and all(r["pid"] == os.getpid() for r in exp.rows)


def test_where_workers_cannot_use_cuda_the_remaining_runs_come_here_with_a_warning():
    parent = os.getpid()

    def run(seed):  # in a worker it fails as CUDA does in a process forked after its parent started CUDA
        if os.getpid() != parent:
            raise RuntimeError("CUDA error: initialization error")
        return {"value": float(seed), "pid": os.getpid()}

    exp = Experiment("fallback", jobs=2)
    with pytest.warns(RuntimeWarning, match="remaining 3 runs go here"):
        with exp.batch():
            exp.run("c", run, seeds=[0, 1, 2])
    assert [r["value"] for r in exp.rows] == [0.0, 1.0, 2.0] and all(r["pid"] == parent for r in exp.rows)


def test_other_errors_of_a_worker_are_not_mistaken_for_pytorch_refusing_a_fork():
    # the three messages as PyTorch 2.11 printed them on an H100 (the autograd one for a CPU sweep after a backward)
    assert fork_refused(RuntimeError("Cannot re-initialize CUDA in forked subprocess. To use CUDA ..."))
    assert fork_refused(RuntimeError("CUDA error: initialization error\nSearch for `cudaErrorInitializationError'"))
    assert fork_refused(
        RuntimeError(
            "Unable to handle autograd's threading in combination with fork-based multiprocessing. See "
            "https://github.com/pytorch/pytorch/wiki/Autograd-and-Fork"
        )
    )
    assert not fork_refused(RuntimeError("CUDA out of memory"))
    assert not fork_refused(ValueError("seed 2 diverged"))


@pytest.mark.parametrize("start", ["spawn", "forkserver"])
def test_workers_that_start_afresh_get_the_runs_by_cloudpickle_and_give_the_same_numbers(one_thread, start):
    fn = train_run(CFG, model=lambda seed: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1))
    tasks = [lambda seed=seed: {**fn(seed), "pid": os.getpid()} for seed in (0, 1)]  # closures, as a notebook's
    fresh = list(run_tasks(tasks, jobs=2, start=start))
    here = list(run_tasks(tasks, jobs=1))
    assert numbers(fresh) == numbers(here)
    assert all(r["pid"] != os.getpid() for r in fresh) and fresh[0]["train_loss"] != fresh[1]["train_loss"]


def test_the_forkserver_starts_once_and_forks_the_workers_of_every_later_sweep():
    def parent():
        return {"parent": os.getppid(), "pid": os.getpid()}

    first, second = (list(run_tasks([parent] * 2, jobs=2, start="forkserver")) for _ in range(2))
    servers = {r["parent"] for r in first + second}
    assert len(servers) == 1 and os.getpid() not in servers  # one server, not this process, for both sweeps
    assert os.getpid() not in {r["pid"] for r in first + second}


def test_vitlib_start_sets_how_workers_start_where_nobody_says(monkeypatch):
    monkeypatch.delenv("VITLIB_START", raising=False)
    assert Experiment("default").start == "fork"
    monkeypatch.setenv("VITLIB_START", "forkserver")
    assert Experiment("from the environment").start == "forkserver"
    assert Experiment("named", start="spawn").start == "spawn"  # a start given by name wins
    results = list(run_tasks([lambda: {"parent": os.getppid()}] * 2, jobs=2))  # from the server, not from here
    assert all(r["parent"] != os.getpid() for r in results)
    monkeypatch.setenv("VITLIB_START", "threads")
    with pytest.raises(ValueError, match=r"\$VITLIB_START is 'threads': set it to one of fork, spawn, forkserver"):
        Experiment("misspelt")


def test_runs_that_cannot_be_pickled_go_to_forked_workers_with_a_warning():
    numbers = (i for i in range(3))  # a generator does not pickle
    tasks = [lambda: {"pid": os.getpid(), "kind": type(numbers).__name__}] * 2
    for start in ("spawn", "forkserver"):
        with pytest.warns(RuntimeWarning, match=f"cannot be sent to {start} workers"):
            results = list(run_tasks(tasks, jobs=2, start=start))
        assert [r["kind"] for r in results] == ["generator"] * 2 and all(r["pid"] != os.getpid() for r in results)
    exp = Experiment("spawned", jobs=2, start="spawn")
    with exp.batch():
        exp.run("c", lambda seed: {"pid": os.getpid(), "square": float(seed * seed)}, seeds=[2, 3])
    assert [r["square"] for r in exp.rows] == [4.0, 9.0] and all(r["pid"] != os.getpid() for r in exp.rows)
    with pytest.raises(ValueError, match="start must be"):
        list(run_tasks(tasks, jobs=2, start="threads"))
    with pytest.raises(ValueError, match="start must be"):
        Experiment("bad", start="threads")
