"""Small timing helpers for the notebooks: how the cost of self-attention grows with the sequence length N.

    from vitlib.bench import attention_cost, loglog_slope
    rows = attention_cost([16, 64, 256, 1024], dim=64)        # seconds and bytes of the N x N weights per N
    loglog_slope([r["N"] for r in rows], [r["seconds"] for r in rows], min_x=128)   # about 2 at large N

Timings depend on the machine and on what else runs on it: they are for looking at, never for exact comparison.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from .attention import attention_weights


def time_call(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> float:
    """The median wall time of `fn()` in seconds over `repeats` calls, after `warmup` untimed calls."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}.")
    for _ in range(max(warmup, 0)):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def attention_weights_bytes(n: int, heads: int = 1, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the attention weights A = softmax(q k^T / sqrt(D_h)): one N x N matrix per head and image."""
    return batch * heads * n * n * torch.empty((), dtype=dtype).element_size()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(D_h)) v written out (appendix A, eq. 6-7); returns (output, weights A)."""
    weights = attention_weights(q, k)
    return weights @ v, weights


def attention_cost(ns: list[int], dim: int = 64, heads: int = 1, batch: int = 1, repeats: int = 3,
                   seed: int = 0, threads: int | None = 1) -> list[dict]:
    """Time the written-out attention softmax(q k^T / sqrt(D_h)) v for each sequence length N in `ns`.

    q, k, v are random (batch, heads, N, dim / heads) tensors. Each row: N, seconds (median of `repeats`), the bytes
    of the weights tensor actually produced (`weights_bytes`, always batch * heads * N * N * 4 in float32) and the
    multiply-adds of the two matrix products (2 N^2 D). `threads` sets PyTorch's CPU threads while timing (restored
    afterwards; None keeps the current setting): one thread gives steadier numbers on a shared machine."""
    if dim % heads:
        raise ValueError(f"dim={dim} is not divisible by heads={heads}.")
    if not ns or min(ns) < 1:
        raise ValueError(f"ns must be a non-empty list of positive sequence lengths, got {ns!r}.")
    generator = torch.Generator().manual_seed(seed)
    rows = []
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for n in ns:
                q, k, v = torch.randn(3, batch, heads, n, dim // heads, generator=generator)
                _, weights = attention(q, k, v)
                seconds = time_call(lambda: attention(q, k, v), repeats=repeats, warmup=1)
                rows.append({"N": n, "seconds": seconds, "weights_bytes": weights.element_size() * weights.numel(),
                             "macs": 2 * batch * n * n * dim})
    finally:
        torch.set_num_threads(before)
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
