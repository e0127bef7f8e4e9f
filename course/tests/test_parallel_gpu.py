"""On a GPU: a sweep's workers share the device, after the notebook has asked whether there is one and saved its
results (both read without starting CUDA here). Each test runs in a fresh interpreter (spawned), whatever other tests
did to CUDA in pytest's process. Skipped without a CUDA GPU. The forked workers' checks passed on an H100; those of
the workers that start afresh (start="spawn" and "forkserver") have not run on a GPU yet."""

import ctypes
import dataclasses
import json
import multiprocessing
import os
import warnings
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch
from test_parallel import numbers

from course.experiments import Experiment
from course.parallel import run_tasks
from course.runs import train_run
from vitlib import create_model
from vitlib.train import TrainConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CFG = TrainConfig(dataset="fashion-mnist-mini", model="ViT-Micro/7", epochs=1, batch_size=128, subset=256)


def cuda_started() -> bool:
    """Whether this process has started the CUDA driver, through PyTorch or any other path (a backward pass does),
    after which a worker forked from it cannot use the GPU. The driver answers CUDA_ERROR_NOT_INITIALIZED (3) until
    cuInit."""
    if torch.cuda.is_initialized():
        return True
    count = ctypes.c_int()
    return ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(count)) != 3


def on_gpu() -> dict:
    x = torch.arange(4.0, device="cuda")
    return {"sum": float(x.sum().item()), "pid": os.getpid(), "gpu": torch.cuda.get_device_name(0)}


def in_fresh_process(fn, *args):
    """fn(*args) in a new interpreter; its error is raised here."""
    with ProcessPoolExecutor(1, multiprocessing.get_context("spawn")) as pool:  # not daemonic: it may fork workers
        return pool.submit(fn, *args).result(timeout=600)  # a hang fails the test


def test_asking_for_the_gpu_and_saving_leave_cuda_unstarted_so_workers_can_use_it(tmp_path):
    in_fresh_process(ask_save_and_sweep, tmp_path)


def test_spawned_workers_use_the_gpu_also_after_this_process_started_cuda_and_forked_ones_fall_back():
    in_fresh_process(workers_after_cuda)


def test_after_a_backward_pass_a_sweep_still_runs_in_workers_with_the_same_numbers():
    in_fresh_process(backward_then_sweep)


def ask_save_and_sweep(tmp_path):
    assert os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"  # set by importing vitlib
    assert torch.cuda.is_available() and not cuda_started()
    exp = Experiment("gpu_sweep", tmp_path, jobs=2)
    model = lambda seed: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)  # noqa: E731
    for lr in (1e-3, 3e-3):  # two batches, each saved when it ends, as a notebook's cells do
        with warnings.catch_warnings(), exp.batch():
            warnings.simplefilter("error")  # no fallback to this process: the runs went to the workers
            exp.train(f"lr={lr:g}", dataclasses.replace(CFG, lr=lr, device="cuda"), seeds=[0, 1], model=model)
        assert not cuda_started()
    saved = json.loads((tmp_path / "gpu_sweep.json").read_text())
    assert len(saved["rows"]) == 4 and all(0.0 <= r["val_acc"] <= 1.0 for r in saved["rows"])
    assert saved["gpu"] == torch.cuda.get_device_name(0)  # read through nvidia-smi before, torch now: the same


def workers_after_cuda():
    results = list(run_tasks([on_gpu] * 3, jobs=3))  # forked, before anything here used CUDA
    assert [r["sum"] for r in results] == [6.0] * 3 and all(r["pid"] != os.getpid() for r in results)
    on_gpu()  # CUDA now started in this process
    assert cuda_started()
    for start in ("spawn", "forkserver"):  # workers that start afresh: unaffected
        again = list(run_tasks([on_gpu] * 2, jobs=2, start=start))
        assert [r["sum"] for r in again] == [6.0] * 2 and all(r["pid"] != os.getpid() for r in again)
    with pytest.warns(RuntimeWarning, match="runs go here"):
        here = list(run_tasks([on_gpu] * 2, jobs=2))  # forked: refused, so they run here
    assert [r["sum"] for r in here] == [6.0] * 2 and all(r["pid"] == os.getpid() for r in here)


def backward_then_sweep():
    torch.set_num_threads(1)  # as the workers: the CPU's sums then match too
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()  # on the CPU, yet PyTorch's autograd engine starts the CUDA driver
    assert cuda_started() and not torch.cuda.is_initialized()
    cfg = dataclasses.replace(CFG, device="cuda")
    fn = train_run(cfg, model=lambda seed: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1))
    tasks = [lambda seed=seed: {**fn(seed), "pid": os.getpid()} for seed in (0, 1, 2)]
    here = list(run_tasks(tasks, jobs=1))
    for start in ("spawn", "forkserver"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            fresh = list(run_tasks(tasks, jobs=3, start=start))
        assert numbers(fresh) == numbers(here)
        assert all(r["pid"] != os.getpid() for r in fresh)
