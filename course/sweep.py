"""Learning-rate sweeps on top of `course.experiments`: train each design at several learning rates, pick each
one's best rate on the validation set, and compare the designs at one shared rate and at their own best rates.

Why it matters (Appendix D.3, Fig. 9): the [class] token and global average pooling (GAP) "work similarly well, but
require different learning-rates" -- a design compared at a single learning rate tuned for the other one looks worse
than it is. So a fair ablation sweeps the learning rate for every design:

    exp = Experiment("pooling", out)
    for pool in ("cls", "gap"):
        sweep(exp, pool, cfg, lrs=[3e-4, 1e-3, 3e-3], seeds=[0, 1, 2], data=data, model=lambda s: make(pool, s),
              pool=pool)
    best = best_lr(exp, "gap")                       # chosen on val_acc, reported on test_acc
    exp.compare(condition("gap", best), condition("cls", best_lr(exp, "cls")), expect="equal", margin=0.01)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from .experiments import Experiment
from .stats import mean_std


def condition(group: str, lr: float) -> str:
    """The condition name of `group` (a design, e.g. 'cls') trained at learning rate `lr`: 'cls lr=0.001'."""
    return f"{group} lr={lr:g}"


def sweep(
    exp: Experiment,
    group: str,
    cfg,
    lrs: Iterable[float],
    seeds: Sequence[int],
    data=None,
    model: Callable[[int], object] | None = None,
    **fields,
) -> list[str]:
    """Train `cfg` at every learning rate in `lrs` (each over all `seeds`) as conditions `condition(group, lr)`.

    `data` and `model` are passed to `Experiment.train` (a model factory of the seed, so every run starts afresh);
    every row also gets the fields group=<group>, lr=<lr> and `fields`. Returns the condition names, in `lrs` order.
    """
    lrs = [float(lr) for lr in lrs]
    if not lrs:
        raise ValueError("sweep needs at least one learning rate in lrs.")
    if any(lr <= 0 for lr in lrs):
        raise ValueError(f"learning rates must be positive, got {lrs}.")
    if len(set(lrs)) != len(lrs):
        raise ValueError(f"learning rates repeat in {lrs}: give each one once.")
    if not list(seeds):
        raise ValueError("sweep needs at least one seed.")
    names = []
    for lr in lrs:
        name = condition(group, lr)
        exp.train(name, dataclasses.replace(cfg, lr=lr), seeds, data=data, model=model, group=group, lr=lr, **fields)
        names.append(name)
    return names


def group_conditions(exp: Experiment, group: str) -> list[str]:
    """The conditions of `group` in `exp`, sorted by learning rate."""
    conds = [c for c, f in exp.fields.items() if f.get("group") == group and "lr" in f]
    if not conds:
        known = sorted({f.get("group") for f in exp.fields.values() if f.get("group") is not None})
        raise KeyError(
            f"no swept conditions for group {group!r} (groups: {', '.join(known) or 'none yet'}); "
            f"run sweep(exp, {group!r}, ...) first."
        )
    return sorted(conds, key=lambda c: exp.fields[c]["lr"])


def sweep_means(exp: Experiment, group: str, metric: str = "val_acc") -> dict[float, tuple[float, float]]:
    """{lr: (mean, std) of `metric` over seeds} for one group."""
    return {exp.fields[c]["lr"]: mean_std(exp.values(c, metric)) for c in group_conditions(exp, group)}


def best_lr(exp: Experiment, group: str, metric: str = "val_acc") -> float:
    """The learning rate with the highest mean `metric` -- choose on the validation set, report on the test set."""
    means = sweep_means(exp, group, metric)
    return max(means, key=lambda lr: means[lr][0])


def rates(exp: Experiment, group: str) -> list[float]:
    """The learning rates `group` was swept at, ascending."""
    return [exp.fields[c]["lr"] for c in group_conditions(exp, group)]


def next_rate(exp: Experiment, group: str, metric: str = "val_acc") -> float | None:
    """Where a sweep of `group` must go on: when its best rate (on `metric`) is the lowest or the highest it tried,
    the next rate beyond that edge (one step of the grid's own ratio, the lowest two or highest two rates'), else
    None: the best rate is bracketed by a lower and a higher one that did worse."""
    tried = rates(exp, group)
    if len(tried) < 2:
        raise ValueError(f"group {group!r} was swept at {tried}: bracketing needs at least two learning rates.")
    best = best_lr(exp, group, metric)
    if best == tried[0]:
        return tried[0] * tried[0] / tried[1]
    if best == tried[-1]:
        return tried[-1] * tried[-1] / tried[-2]
    return None


def _widen(
    exp: Experiment, run_round: Callable[[dict], None], todo: dict[str, list[float]], widen: int, metric: str
) -> dict[str, list[float]]:
    """Run `todo` ({group: rates}) by run_round, then for every group whose best rate lies at the edge of its grid one
    rate beyond it (`next_rate`), at most `widen` times; each round in one `exp.batch`. Returns {group: rates added}."""
    added: dict[str, list[float]] = {name: [] for name in todo}
    for round_ in range(widen + 1):
        with exp.batch():
            run_round(todo)
        if round_ == widen:
            break
        todo = {name: [lr] for name in added if (lr := next_rate(exp, name, metric)) is not None}
        for name, (lr,) in todo.items():
            added[name].append(lr)
        if not todo:
            break
    return added


def _chosen(exp: Experiment, group: str, widened: list[float], metric: str) -> dict:
    """{'best', 'lrs', 'widened', 'bracketed', 'runner_up', 'margin'} of a widened sweep of `group` (see
    `bracketed_sweep`); runner_up and margin are None where a single rate was tried."""
    tried, best = rates(exp, group), best_lr(exp, group, metric)
    means = {lr: m for lr, (m, _) in sweep_means(exp, group, metric).items()}
    others = [lr for lr in means if lr != best]
    runner_up = max(others, key=lambda lr: means[lr]) if others else None
    return {
        "best": best,
        "lrs": tried,
        "widened": widened,
        "bracketed": tried[0] < best < tried[-1],
        "runner_up": runner_up,
        "margin": means[best] - means[runner_up] if others else None,
    }


def rate_text(choice: dict, short: bool = False) -> str:
    """A rate choice of `choose_rates` or `bracketed_sweep`, as printed beside a verdict: 'rates tried 0.001, 0.003,
    0.009 -> 0.003 (+0.004 on validation over 0.009)', or with short=True 'rate 0.003 (tried 0.001, 0.003, 0.009;
    +0.004 over 0.009)'; a grid widened because a best rate lay at its edge, and a choice still at the edge, say so.
    The margin over the runner-up shows how close the choice was: one below the spread of the arm's seeds (the std
    printed with its verdict) may go the other way on another seed or machine, and move the verdict with it."""
    tried = ", ".join(f"{lr:.2g}" for lr in choice["lrs"])
    widened = ", ".join(f"{lr:.2g}" for lr in choice.get("widened") or ())
    margin = choice.get("margin")  # None for a single rate tried; absent from a choice made by hand
    over = f"over {choice['runner_up']:.2g}" if margin is not None else None
    if short:
        notes = ([f"widened by {widened}"] if widened else []) + ([] if choice["bracketed"] else ["at the edge"])
        return (
            f"rate {choice['best']:.2g} (tried {', '.join([tried, *notes])}{f'; {margin:+.3f} {over}' if over else ''})"
        )
    notes = [f"{margin:+.3f} on validation {over}"] if over else []
    notes += [f"the grid widened by {widened}"] if widened else []
    notes += [] if choice["bracketed"] else ["at the edge of what was tried"]
    return f"rates tried {tried} -> {choice['best']:.2g}" + (f" ({'; '.join(notes)})" if notes else "")


def bracketed_sweep(
    exp: Experiment,
    group: str,
    cfg,
    lrs: Iterable[float],
    seeds: Sequence[int],
    widen: int = 2,
    metric: str = "val_acc",
    **options,
) -> dict:
    """`sweep` over `lrs`, then, while the best rate (on `metric`) lies at the grid's edge, one more rate beyond that
    edge (`next_rate`), at most `widen` times; the runs of each round go side by side (`exp.batch`, exp.jobs at a
    time), so call it outside a batch. `options` go to `sweep` (data, model and the rows' fields).

    Returns {'best': the chosen rate, 'lrs': every rate tried, 'widened': the rates added, 'bracketed': whether a
    lower and a higher rate did worse than the best, 'runner_up': the rate that came second, 'margin': by how much
    of `metric` it trailed the best} -- print it beside the verdict (`rate_text`)."""
    added = _widen(exp, lambda todo: sweep(exp, group, cfg, todo[group], seeds, **options), {group: lrs}, widen, metric)
    return _chosen(exp, group, added[group], metric)


def choose_rates(
    exp: Experiment,
    arms: dict[str, Callable[[float], Callable[[int], dict]]],
    lrs: Iterable[float] | dict[str, Iterable[float]],
    seeds: Sequence[int] = (0,),
    widen: int = 2,
    metric: str = "val_acc",
) -> dict[str, dict]:
    """Each arm's own peak learning rate, chosen on `metric` (validation) before the arms are compared: arms[name](lr)
    is the fn(seed) -> metrics of one run of that arm at rate lr. Every arm runs at every rate of `lrs` (one grid for
    all arms, or {name: grid} for arms whose rates live on different scales, such as two optimisers) over `seeds`
    (by default one seed: the choice, not the verdict), the runs of all arms side by side (`exp.batch`); an arm whose
    best rate lies at the edge of what it tried gets one more rate beyond it (`next_rate`), at most `widen` times.
    Rows go to `exp` (keep it apart from the experiment that judges the claim) as conditions `condition(name, lr)`.

    Returns {name: {'best', 'lrs', 'widened', 'bracketed'}} as `bracketed_sweep` does -- print it beside the verdict --
    and 'runs': {seed: metrics} of the arm's runs at the chosen rate, for `Experiment.run(known=)`: the verdict's
    runs of these seeds would be the same runs again (same fn, rate and seed), so they are not trained twice."""
    grids = lrs if isinstance(lrs, dict) else dict.fromkeys(arms, list(lrs))
    if set(grids) != set(arms):
        raise ValueError(
            f"choose_rates: give a grid for every arm and no other, got grids for {sorted(grids)} and "
            f"arms {sorted(arms)}."
        )
    pending = {name: sorted({float(lr) for lr in grids[name]}) for name in arms}
    for name, grid in pending.items():
        if len(grid) < 2:
            raise ValueError(
                f"choose_rates needs at least two learning rates to bracket a choice, got {grid} for {name!r}."
            )

    def run_round(todo: dict[str, list[float]]) -> None:
        for name, group_lrs in todo.items():
            for lr in group_lrs:
                exp.run(condition(name, lr), arms[name](lr), seeds, group=name, lr=lr)

    added = _widen(exp, run_round, pending, widen, metric)
    out = {}
    for name in arms:
        out[name] = _chosen(exp, name, added[name], metric)
        out[name]["runs"] = {
            r["seed"]: {k: v for k, v in r.items() if k not in ("condition", "seed", "group")}
            for r in exp.rows
            if r["condition"] == condition(name, out[name]["best"])
        }
    return out


def plot_sweep(
    exp: Experiment, ax, groups: Iterable[str], metric: str = "test_acc", best_metric: str | None = "val_acc"
):
    """Mean ± std of `metric` against the learning rate, one line per group (log x axis); with `best_metric`, each
    group's best learning rate (chosen on that metric) is circled. Returns {group: best lr or None}."""
    best = {}
    for group in groups:
        line = exp.errorbar(ax, x="lr", metric=metric, conditions=group_conditions(exp, group), label=group)
        best[group] = None
        if best_metric is not None:
            lr = best_lr(exp, group, best_metric)
            m, _ = mean_std(exp.values(condition(group, lr), metric))
            ax.plot([lr], [m], "o", ms=13, mfc="none", mec=line.lines[0].get_color(), mew=1.5)
            best[group] = lr
    ax.set_xscale("log")
    ax.set(xlabel="peak learning rate", ylabel=metric)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return best


def binomial_tolerance(acc: float, n_test: int) -> float:
    """One binomial standard error of a test accuracy `acc` measured on `n_test` images, sqrt(acc (1 - acc) / n).

    A tolerance for 'these two designs are equal': a difference smaller than this is below what the test set itself
    can resolve for one model (about 0.01 for 2,000 images at 70-80 % accuracy, 0.004 for 10,000)."""
    if not 0.0 <= acc <= 1.0:
        raise ValueError(f"acc must be an accuracy in [0, 1], got {acc}.")
    if n_test < 1:
        raise ValueError(f"n_test must be a positive number of test images, got {n_test}.")
    return (acc * (1 - acc) / n_test) ** 0.5
