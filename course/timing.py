"""Measured speed: how the cost of self-attention grows with the sequence length N, training images per second,
and the timing rounds of the benchmarks (models timed in turns, so a change in the machine's load hits all alike).

    from course.timing import attention_cost, loglog_slope, train_throughput
    rows = attention_cost([16, 64, 256, 1024], dim=64)        # seconds and bytes of the N x N weights per N
    loglog_slope([r["N"] for r in rows], [r["seconds"] for r in rows], min_x=128)   # about 2 at large N
    train_throughput(model, batch_size=64)                     # images/s of forward + backward + AdamW

The measurements are `torch.utils.benchmark.Timer`'s (`time_call`). Timings depend on the machine and on what else
runs on it: compare them within one run only.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from vitlib.model import attention_weights
from vitlib.utils import pair


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model name. A GPU's name is read without starting CUDA in this process (through
    nvidia-smi) until CUDA is in use, so that asking it does not keep a later sweep's workers off the GPU."""
    if device.type == "cuda":
        if torch.cuda.is_initialized():
            return torch.cuda.get_device_name(device)
        return _nvidia_smi_name(device.index or 0) or "a CUDA GPU (its name is read once CUDA is in use)"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache  # Experiment.save asks at every row; the answer does not change
def _nvidia_smi_name(index: int) -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", str(index)],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def sync(device: torch.device) -> None:
    """Wait for the GPU's queued work (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], repeats: int = 3, threads: int | None = None) -> float:
    """Seconds per call of `fn()`: `repeats` calls timed as one block by `torch.utils.benchmark.Timer.timeit`, after
    its warm-up (2 untimed calls), with the clock waiting for the GPU's queued work and garbage collection paused.
    `threads`: PyTorch's CPU threads while timing (restored afterwards; None keeps the current setting)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}.")
    cpp_extension = logging.getLogger("torch.utils.cpp_extension")
    level = cpp_extension.level
    cpp_extension.setLevel(logging.ERROR)  # importing the Timer warns about CUDA_HOME where there is no GPU
    try:
        from torch.utils.benchmark import Timer
    finally:
        cpp_extension.setLevel(level)
    threads = torch.get_num_threads() if threads is None else threads
    return Timer("fn()", globals={"fn": fn}, num_threads=threads).timeit(repeats).mean


def attention_weights_bytes(n: int, heads: int = 1, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the attention weights A = softmax(q k^T / sqrt(D_h)): one N x N matrix per head and image."""
    return batch * heads * n * n * torch.empty((), dtype=dtype).element_size()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(D_h)) v written out (appendix A, eq. 6-7); returns (output, weights A)."""
    weights = attention_weights(q, k)
    return weights @ v, weights


def attention_cost(
    ns: list[int],
    dim: int = 64,
    heads: int = 1,
    batch: int = 1,
    repeats: int = 3,
    seed: int = 0,
    threads: int | None = 1,
) -> list[dict]:
    """Time the written-out attention softmax(q k^T / sqrt(D_h)) v for each sequence length N in `ns`.

    q, k, v are random (batch, heads, N, dim / heads) tensors. Each row: N, seconds per call (`time_call`: `repeats`
    calls timed as one block), the bytes of the weights tensor actually produced (`weights_bytes`, always
    batch * heads * N * N * 4 in float32) and the multiply-adds of the two matrix products (2 N^2 D). `threads` sets
    PyTorch's CPU threads while timing (restored afterwards; None keeps the current setting): one thread gives
    steadier numbers on a shared machine."""
    if dim % heads:
        raise ValueError(f"dim={dim} is not divisible by heads={heads}.")
    if not ns or min(ns) < 1:
        raise ValueError(f"ns must be a non-empty list of positive sequence lengths, got {ns!r}.")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    with torch.no_grad():
        for n in ns:
            q, k, v = torch.randn(3, batch, heads, n, dim // heads, generator=generator)
            _, weights = attention(q, k, v)
            seconds = time_call(lambda q=q, k=k, v=v: attention(q, k, v), repeats=repeats, threads=threads)
            rows.append(
                {
                    "N": n,
                    "seconds": seconds,
                    "weights_bytes": weights.element_size() * weights.numel(),
                    "macs": 2 * batch * n * n * dim,
                }
            )
    return rows


def loglog_slope(x: list[float], y: list[float], min_x: float | None = None) -> float:
    """Least-squares slope of log(y) against log(x) (the exponent a of y ~ x^a), using the points with x >= min_x."""
    pts = [(math.log(a), math.log(b)) for a, b in zip(x, y) if (min_x is None or a >= min_x) and a > 0 and b > 0]
    if len(pts) < 2:
        raise ValueError(f"need at least two positive points with x >= {min_x} to fit a slope, got {len(pts)}.")
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        raise ValueError("all x values are equal: no slope can be fitted.")
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def train_throughput(
    model: nn.Module,
    batch_size: int = 64,
    steps: int = 5,
    repeats: int = 3,
    threads: int | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
    image_size: int | tuple[int, int] | None = None,
    in_channels: int | None = None,
) -> float:
    """Measured training speed in images per second: forward, cross-entropy, backward and one AdamW step on random
    images of the model's size: `repeats` runs of `steps` steps timed as one block after two untimed runs (`time_call`).

    Uses a copy of the model (its weights are not changed). A vitlib ViT knows its image size and channels; for another
    model (a CNN) pass image_size and in_channels. `threads` sets PyTorch's CPU threads while timing (restored
    afterwards). Timings depend on the machine and what else runs on it: compare them within one run only."""
    if batch_size < 1 or steps < 1 or repeats < 1:
        raise ValueError(f"batch_size, steps and repeats must be at least 1, got {batch_size}, {steps}, {repeats}.")
    device = torch.device(device)
    net = copy.deepcopy(model).to(device).train()
    channels = in_channels or getattr(net, "in_channels", None)
    size = image_size or getattr(net, "image_size", None)
    if channels is None or size is None:
        raise ValueError(
            f"{type(model).__name__} does not say what images it takes: pass image_size= and in_channels=."
        )
    h, w = pair(size, "image_size")
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, channels, h, w, generator=g).to(device)
    with torch.no_grad():
        num_classes = net(images[:1]).shape[-1]
    labels = torch.randint(0, num_classes, (batch_size,), generator=g).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)

    def run() -> None:
        for _ in range(steps):
            loss = F.cross_entropy(net(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        sync(device)

    seconds = time_call(run, repeats=repeats, threads=threads)  # the warm-up: allocations, AdamW's state
    return batch_size * steps / seconds


def logged_throughput(steps: list[dict]) -> float:
    """The median of the `images_per_s` that `vitlib.train.train` logged (result.steps), over the log intervals."""
    values = [row["images_per_s"] for row in steps if row.get("images_per_s")]
    if not values:
        raise ValueError("no images_per_s in these rows: pass result.steps of a vitlib.train.train run.")
    return statistics.median(values)


def images_per_s(step: Callable[[], object], steps: int, batch_size: int) -> float:
    """Images per second of `steps` calls of `step` on batches of `batch_size` (`time_call`: after 2 untimed calls,
    the GPU waited for at both ends)."""
    return batch_size / time_call(step, repeats=steps)


def timed_rounds(
    steps: dict, warmup: int, rounds: int, steps_per_round: int, batch_size: int, device: torch.device
) -> dict[str, list[float]]:
    """Warm each step function up, then time them in turns: `rounds` rounds of `steps_per_round` timed steps each
    (`images_per_s`), the order reversed every round. Returns images/s per round for every name of `steps`."""
    for name, step in steps.items():
        t = time.perf_counter()
        for _ in range(warmup):
            step()
        sync(device)
        print(f"warm-up {name}: {warmup} steps in {time.perf_counter() - t:.1f}s")
    rates = {k: [] for k in steps}
    for r in range(rounds):
        order = list(steps) if r % 2 == 0 else list(steps)[::-1]
        for name in order:
            rates[name].append(images_per_s(steps[name], steps_per_round, batch_size))
    return rates
