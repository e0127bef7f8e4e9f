"""The statistics of the course's experiments: mean ± standard deviation over seeds, the difference of two
conditions with its standard error (Welch), and the verdict on a claim of the paper: one rule for the whole course.

    reproduced     the paper's direction, beyond 2 standard errors (equality: within the margin, noise included)
    contradicted   the opposite direction beyond 2 standard errors (equality: outside the margin, noise included)
    inconclusive   neither: the data cannot tell, at this scale and with these seeds
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

VERDICTS = ("reproduced", "contradicted", "inconclusive")


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


def verdict(diff: float, se: float, expect: str = "greater", k: float = 2.0) -> str:
    """The course's one rule for a claim about a direction: `diff` is (the paper's better condition) minus (its worse
    one), or the other way round with expect='less'.

    'reproduced': the paper's direction, beyond k standard errors; 'contradicted': the opposite direction beyond k
    standard errors; 'inconclusive': neither (the difference is within the noise, whichever its sign)."""
    if expect not in ("greater", "less"):
        raise ValueError(f"expect must be 'greater' or 'less' (for 'about equal' use equivalence), got {expect!r}.")
    signed = diff if expect == "greater" else -diff
    if se < 0 or math.isnan(se):
        raise ValueError(f"a standard error must be a number >= 0, got {se}.")
    return "reproduced" if signed > k * se else "contradicted" if signed < -k * se else "inconclusive"


def equivalence(diff: float, se: float, margin: float, k: float = 2.0) -> str:
    """The rule for a claim of equality ('about equal'), with an equivalence margin stated in advance.

    'reproduced': the whole interval diff ± k se lies within ±margin; 'contradicted': the whole interval lies outside
    it (a difference larger than the margin, beyond the noise); 'inconclusive': the interval crosses the margin."""
    if margin <= 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}.")
    if abs(diff) + k * se <= margin:
        return "reproduced"
    return "contradicted" if abs(diff) - k * se > margin else "inconclusive"


def contrast(a: tuple[float, float], b: tuple[float, float], n: int, compared: str, expect: str = "greater") -> dict:
    """A claim about two independent effects, each (estimate, standard error), e.g. 'the gap shrinks' as (gap at the
    smallest size) - (gap at the largest): their difference, its standard error sqrt(se_a^2 + se_b^2) and its
    verdict, as the comparison dict `Experiment.claim` takes (like `Experiment.compare`'s)."""
    for name, (_, se_) in (("a", a), ("b", b)):
        if se_ < 0 or math.isnan(se_):
            raise ValueError(f"contrast: the standard error of {name} must be a number >= 0, got {se_}.")
    diff, se = a[0] - b[0], math.hypot(a[1], b[1])
    return {"diff": diff, "se": se, "verdict": verdict(diff, se, expect), "n": n, "compared": compared}


def all_of(*comparisons: dict) -> dict:
    """One verdict for a claim made of several comparisons that must all hold (e.g. '1D, 2D and relative are about
    equal': 1D vs 2D and 1D vs relative): reproduced when every part is, contradicted when any part is, else
    inconclusive. The effect and standard error reported are those of the part furthest from reproduced."""
    order = {"reproduced": 0, "inconclusive": 1, "contradicted": 2}
    worst = max(comparisons, key=lambda c: (order[c["verdict"]], abs(c["diff"]) + 2 * c["se"]))
    return {
        **worst,
        "verdict": worst["verdict"],
        "n": min(c["n"] for c in comparisons),
        "compared": "; ".join(c["compared"] for c in comparisons),
    }
