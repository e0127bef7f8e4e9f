"""Helpers shared by the multi-process tests (test_distributed.py: DDP, test_fsdp.py: FSDP): start `vitlib.train` in
one process or under torchrun, wait for it, read its metrics, and compare two runs' weights."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # several processes on 2 cores: one thread each


def launch(out: Path, options: list[str], *extra: str, processes: int = 1) -> subprocess.Popen:
    """python -m vitlib.train <options> --out <out> <extra>, under torchrun when processes > 1 (not waited for)."""
    runner = [TORCHRUN, f"--nproc_per_node={processes}", "--standalone"] if processes > 1 else [sys.executable]
    return subprocess.Popen(
        [*runner, "-m", "vitlib.train", *options, "--out", str(out), *extra],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process: subprocess.Popen) -> str:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-4000:]
    return output


def metrics(out: Path) -> list[dict]:
    with open(out / "metrics.csv", newline="") as f:
        return [{k: float(v) for k, v in row.items() if k != "time_s"} for row in csv.DictReader(f)]


def assert_trained_alike(a: dict, b: dict, atol: float = 2e-5) -> None:
    """Two state dicts of the same training run two ways agree to `atol`, the attention key bias aside.

    The key bias gets an exactly-zero gradient (softmax ignores a constant added to every score), so its "gradient" is
    rounding noise that Adam rescales to steps of size ~lr: it drifts apart by up to ~lr*steps between any two
    differently-ordered float computations (1 vs 2 threads in one process: 5.7e-4). Queries and values are compared
    like every other weight."""
    assert a.keys() == b.keys()
    dim = a["norm.weight"].numel()
    for name in a:
        x, y = a[name], b[name]
        if name.endswith("attn.qkv.bias"):
            x, y = torch.cat([x[:dim], x[2 * dim :]]), torch.cat([y[:dim], y[2 * dim :]])
        assert torch.allclose(x, y, rtol=0, atol=atol), f"{name}: max |diff| {(x - y).abs().max():.3g}"
