"""The statistics of the course's experiments: mean ± standard deviation over seeds, the difference of two
conditions with its standard error, and the verdict on a claim of the paper: one rule for the whole course.

    reproduced     the 95% interval of the effect (Welch's t, the paired t where the arms share seeds, or the
                   one-sample t against a constant) lies wholly on the paper's side of zero (equality: the 90%
                   interval lies inside the margin, TOST)
    contradicted   the interval lies wholly on the other side (equality: wholly outside the margin)
    inconclusive   neither: the data cannot tell, at this scale and with these seeds

Testing many claims at once, `holm` adjusts their p-values (how many survive being tested together).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

VERDICTS = ("reproduced", "contradicted", "inconclusive")
NOT_TESTED = "not tested"  # a claim whose design could not test it in this run (Experiment.claim(tested=False))
# what a verdict under the t rule records beside effect and SE, kept with the claim and in the claims report
TEST_FIELDS = ("low", "high", "level", "p", "df", "test", "hit_budget")


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


def interval_text(v: dict) -> str:
    """A judged effect as text: '+0.031 [+0.012, +0.050], p 0.004' (an equality claim adds its margin); a result
    recorded before the t rule (no p): '+0.031 ± 0.009 SE, 2-SE rule'."""
    margin = f", margin ±{v['margin']:g}" if v.get("margin") else ""
    effect = v["diff"] if "diff" in v else v["effect"]
    if v.get("p") is None:
        return f"{effect:+.3f} ± {v['se']:.3f} SE{margin}, 2-SE rule"
    return f"{effect:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}]{margin}, p {v['p']:.2g}"


def all_of(*comparisons: dict) -> dict:
    """One verdict for a claim made of several comparisons that must all hold (e.g. '1D, 2D and relative are about
    equal': 1D vs 2D and 1D vs relative): reproduced when every part is, contradicted when any part is, else
    inconclusive. The effect, interval and p reported are those of the part furthest from reproduced."""
    order = {"reproduced": 0, "inconclusive": 1, "contradicted": 2}
    worst = max(comparisons, key=lambda c: (order[c["verdict"]], max(abs(c["low"]), abs(c["high"]))))
    return {
        **worst,
        "verdict": worst["verdict"],
        "n": min(c["n"] for c in comparisons),
        "compared": "; ".join(c["compared"] for c in comparisons),
    }


# ------------------------------------------------------------------------------------------------------------------
# The t-based rule: a 95% interval from Student's t (Welch-Satterthwaite degrees of freedom, or paired by seed), an
# equivalence by two one-sided tests (TOST), and Holm's correction for judging many claims at once.
# ------------------------------------------------------------------------------------------------------------------
def _two_arms(a: Iterable[float], b: Iterable[float], paired: bool) -> tuple[list[float], list[float]]:
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        raise ValueError(
            f"a t interval needs at least 2 seeds per arm, got {len(a)} and {len(b)}: run more seeds "
            f"(the course's reference scale uses 5)."
        )
    if paired and len(a) != len(b):
        raise ValueError(
            f"a paired test needs one value per seed in each arm, in the same seed order; got {len(a)} and {len(b)}."
        )
    if any(math.isnan(v) or math.isinf(v) for v in a + b):
        raise ValueError("the values compared must be finite numbers; a run that diverged (nan) cannot be judged.")
    return a, b


def t_interval(a: Iterable[float], b: Iterable[float], paired: bool = False, level: float = 0.95) -> dict:
    """The effect mean(a) - mean(b) with its standard error, degrees of freedom, two-sided `level` interval and
    two-sided p-value (H0: no difference), by Welch's t (independent arms) or by the paired t (arms paired by seed:
    a[i] and b[i] share seed i, e.g. one pre-training per seed fine-tuned two ways)."""
    a, b = _two_arms(a, b, paired)
    if paired:
        d = [x - y for x, y in zip(a, b)]
        diff, se, df = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d)), len(d) - 1
    else:
        (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
        va, vb = sa**2 / len(a), sb**2 / len(b)
        diff, se = ma - mb, math.sqrt(va + vb)
        # Welch-Satterthwaite; with no spread at all in either arm the interval is a point
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb > 0 else float("inf")
    test = "paired t" if paired else "Welch's t"
    return {"diff": diff, "se": se, "df": df, **_interval(diff, se, df, level), "test": test}


def _interval(diff: float, se: float, df: float, level: float = 0.95) -> dict:
    """The two-sided `level` interval and p-value (H0: no difference) of an effect with standard error `se` and `df`
    degrees of freedom (Student's t); with se 0 the interval is a point."""
    from scipy import stats as st

    if se == 0:
        return {"low": diff, "high": diff, "level": level, "p": 1.0 if diff == 0 else 0.0}
    half = st.t.ppf(0.5 + level / 2, df) * se
    return {"low": diff - half, "high": diff + half, "level": level, "p": float(2 * st.t.sf(abs(diff) / se, df))}


def _check_direction(expect: str) -> None:
    if expect not in ("greater", "less"):
        raise ValueError(f"expect must be 'greater' or 'less' (for 'about equal' use tost), got {expect!r}.")


def _direction_verdict(out: dict, expect: str) -> str:
    """The rule for a direction: where the interval [out['low'], out['high']] lies, 'a <expect> b' on its plus side."""
    _check_direction(expect)
    low, high = (out["low"], out["high"]) if expect == "greater" else (-out["high"], -out["low"])
    return "reproduced" if low > 0 else "contradicted" if high < 0 else "inconclusive"


def t_verdict(a: Iterable[float], b: Iterable[float], expect: str = "greater", paired: bool = False) -> dict:
    """The course's rule for a claim about a direction, 'a <expect> b': reproduced when the 95% two-sided interval of
    mean(a) - mean(b) lies wholly on the paper's side of zero, contradicted when wholly on the other side,
    inconclusive otherwise. Returns `t_interval`'s dict with the verdict (and `expect`)."""
    _check_direction(expect)  # an unknown direction fails before any work
    out = t_interval(a, b, paired)
    out["verdict"], out["expect"] = _direction_verdict(out, expect), expect
    return out


def t_verdict_against(values: Iterable[float], value: float, expect: str = "greater", level: float = 0.95) -> dict:
    """`t_verdict` of seeds against a constant (a threshold, or a baseline with no seeds): the one-sample t of
    mean(values) - value, its `level` interval, p, the verdict by the same rule, `expect` and n (the seeds)."""
    _check_direction(expect)
    values = [float(v) for v in values]
    if len(values) < 2 or any(math.isnan(v) or math.isinf(v) for v in values + [float(value)]):
        raise ValueError(
            f"a one-sample t needs at least 2 finite values (seeds) and a finite constant, got {values} and {value}."
        )
    d = [v - value for v in values]
    diff, se, df = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d)), len(d) - 1
    out = {"diff": diff, "se": se, "df": df, **_interval(diff, se, df, level), "test": "one-sample t"}
    return {**out, "verdict": _direction_verdict(out, expect), "expect": expect, "n": len(d)}


def by_seeds(a: Sequence[float], b: Sequence[float], expect: str = "greater", paired: bool = False) -> dict[int, dict]:
    """{k: `t_verdict` of the first k seeds of a against the first k of b} for k = 2 .. the seeds both have: how a
    verdict moves as an experiment adds seeds (its interval narrows roughly as 1/sqrt(k), its t quantile shrinks)."""
    a, b = list(a), list(b)
    return {k: t_verdict(a[:k], b[:k], expect, paired) for k in range(2, min(len(a), len(b)) + 1)}


def width_change(judged: dict[int, dict]) -> str:
    """How the 95% interval of `by_seeds` changed from its fewest seeds to its most, in words: 'the interval at 5
    seeds is 6.5x narrower than at 2' (or '1.7x wider', when the later seeds disagree more than the first ones)."""
    if len(judged) < 2:
        raise ValueError(f"width_change needs verdicts at two numbers of seeds at least, got {sorted(judged)}.")
    few, most = min(judged), max(judged)
    width = {k: judged[k]["high"] - judged[k]["low"] for k in (few, most)}
    if not all(math.isfinite(w) and w > 0 for w in width.values()):
        raise ValueError(
            f"width_change: the intervals at {few} and {most} seeds must have a positive width, got {width}."
        )
    ratio = width[few] / width[most]
    how = f"{ratio:.1f}x narrower" if ratio >= 1 else f"{1 / ratio:.1f}x wider"
    return f"the interval at {most} seeds is {how} than at {few}"


def contrast(a: dict, b: dict, n: int, compared: str, expect: str = "greater") -> dict:
    """A claim about two independent effects, each a `t_interval` (or `compare`) dict with diff, se and df, e.g.
    'the gap shrinks' as (gap at the smallest size) - (gap at the largest): the difference of the effects, its
    standard error sqrt(se_a^2 + se_b^2), Welch-Satterthwaite's degrees of freedom, the 95% interval, p and the
    verdict, as the comparison dict `Experiment.claim` takes."""
    for name, part in (("a", a), ("b", b)):
        if not all(k in part for k in ("diff", "se", "df")) or part["se"] < 0 or math.isnan(part["se"]):
            raise ValueError(
                f"contrast: {name} must be an effect from t_interval or Experiment.compare (diff, se >= 0, df); "
                f"got {part}."
            )
    _check_direction(expect)
    diff, se = a["diff"] - b["diff"], math.hypot(a["se"], b["se"])
    parts = [(p["se"] ** 2, p["df"]) for p in (a, b) if p["se"] > 0]
    df = se**4 / sum(v**2 / d for v, d in parts) if parts else float("inf")
    out = {"diff": diff, "se": se, "df": df, **_interval(diff, se, df)}
    return {
        **out,
        "test": "Welch's t (difference of two effects)",
        "expect": expect,
        "verdict": _direction_verdict(out, expect),
        "n": n,
        "compared": compared,
    }


def tost(a: Iterable[float], b: Iterable[float], margin: float, paired: bool = False) -> dict:
    """Equivalence by two one-sided tests at 5% each, with a `margin` stated before the run: reproduced ('about
    equal') when the 90% interval of mean(a) - mean(b) lies inside (-margin, margin); contradicted when it lies wholly
    outside (a difference larger than the margin); inconclusive otherwise. `p` is TOST's p-value, the larger of the
    two one-sided p-values (small: equivalent)."""
    from scipy import stats as st

    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive and stated in advance, got {margin}.")
    out = t_interval(a, b, paired, level=0.90)
    diff, se, df = out["diff"], out["se"], out["df"]
    if se == 0:
        p = 0.0 if abs(diff) < margin else 1.0
    else:
        p = float(max(st.t.sf((diff + margin) / se, df), st.t.cdf((diff - margin) / se, df)))
    inside = -margin < out["low"] and out["high"] < margin
    outside = out["low"] >= margin or out["high"] <= -margin
    out.update(p=p, margin=margin, expect="equal", test=f"TOST ({out['test']})")
    out["verdict"] = "reproduced" if inside else "contradicted" if outside else "inconclusive"
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values for testing them together (family-wise error rate): sorted
    ascending, p_(i) is multiplied by (m - i + 1), made non-decreasing and capped at 1; returned in the input order.
    A claim 'survives' at 5% when its adjusted p is below 0.05."""
    p = [float(v) for v in pvalues]
    if any(not 0.0 <= v <= 1.0 for v in p):
        raise ValueError(f"p-values must lie in [0, 1], got {p}.")
    order = sorted(range(len(p)), key=p.__getitem__)
    adjusted, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def detectable(se: float, df: float | None, margin: float | None = None, power: float = 0.8) -> float:
    """The smallest true effect a design with this standard error finds with `power` by the course's rule (the 95 %
    interval clear of zero: (t_0.975 + t_power) SE); for a claim of equality (`margin`), the smallest margin its 90 %
    interval fits inside with `power` when the arms are truly equal ((t_0.95 + t_(1+power)/2) SE). `df` None: normal."""
    from scipy import stats as st

    quantile = st.norm.ppf if df is None or math.isinf(df) else (lambda q: st.t.ppf(q, df))
    if margin is None:
        return (quantile(0.975) + quantile(power)) * se
    return (quantile(0.95) + quantile((1 + power) / 2)) * se
