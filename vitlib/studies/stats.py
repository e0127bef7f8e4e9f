"""The statistics of the course's experiments: mean ± standard deviation over seeds, the difference of two
conditions with its standard error (Welch), and the verdict on a claim of the paper."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

VERDICTS = ("reproduced", "partly", "not reproduced")


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1); the std of a single value is 0."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std of no values: run at least one seed first.")
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def fmt(values: Iterable[float], digits: int = 3) -> str:
    """'0.842 ± 0.004 (n=3)'."""
    values = list(values)
    m, s = mean_std(values)
    return f"{m:.{digits}f} ± {s:.{digits}f} (n={len(values)})"


def difference(a: Iterable[float], b: Iterable[float]) -> tuple[float, float]:
    """mean(a) - mean(b) and its standard error sqrt(s_a^2/n_a + s_b^2/n_b) (Welch), from independent seeds."""
    a, b = list(a), list(b)
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    return ma - mb, math.sqrt(sa**2 / len(a) + sb**2 / len(b))


def verdict(diff: float, se: float, expect: str = "greater", tolerance: float = 0.0, k: float = 2.0) -> str:
    """Judge a measured difference against the paper's claim; `expect` is the claim's direction.

    greater / less: 'reproduced' when the difference has the claimed sign and exceeds k standard errors, 'partly'
    when it has the sign but is within the noise, 'not reproduced' otherwise. equal (the paper finds no real
    difference): 'reproduced' when |diff| <= max(k se, tolerance), else 'not reproduced'.
    """
    if expect not in ("greater", "less", "equal"):
        raise ValueError(f"expect must be 'greater', 'less' or 'equal', got {expect!r}.")
    if expect == "equal":
        return "reproduced" if abs(diff) <= max(k * se, tolerance) else "not reproduced"
    signed = diff if expect == "greater" else -diff
    if signed > k * se and signed > 0:
        return "reproduced"
    return "partly" if signed > 0 else "not reproduced"
