"""The paper's claims in miniature: run each condition over several seeds, keep every number with the parameters that
made it (JSON and CSV in the run folder), summarise as mean ± std, compare two conditions, and write the table of
claim / paper's number / our number / verdict."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import torch

from vitlib._version import __version__
from vitlib.utils import write_csv, write_json

from .paper_claims import CLAIMS
from .parallel import check_jobs, check_start, run_tasks
from .runs import stop_reason, train_metrics, train_run  # noqa: F401 (stop_reason, train_metrics: re-exported)
from .stats import NOT_TESTED, TEST_FIELDS, VERDICTS, fmt, interval_text, mean_std, t_verdict, tost
from .timing import device_name

RESUME_VARIABLE = "VITLIB_RESUME"  # "1": an experiment reuses the rows an interrupted run of it saved (see Experiment)


def new_run_folder(root: str | Path, name: str) -> Path:
    """A fresh folder root/name/<date-time>[-k]: a new run never writes over the files of an earlier one."""
    base = Path(root) / name / datetime.now().strftime("%Y%m%d-%H%M%S")
    path, k = base, 1
    while path.exists():
        path, k = base.with_name(f"{base.name}-{k}"), k + 1
    path.mkdir(parents=True)
    return path


class Experiment:
    """Rows of (condition, seed, fields, metrics), saved to out/<name>.json and .csv after every seed.

    `jobs`: runs side by side inside `with exp.batch():` (the numbers are the same for any `jobs`); `start`: how
    those workers start, 'fork', 'forkserver' or 'spawn' (`course.parallel`; None: $VITLIB_START, else fork).
    With VITLIB_RESUME=1 (`scripts/run_experiments.py --resume`) the rows an interrupted run with the same `params`
    saved in `out` are reused, not trained again."""

    def __init__(
        self,
        name: str,
        out: str | Path | None = None,
        params: dict | None = None,
        jobs: int = 1,
        start: str | None = None,
    ):
        self.name, self.params = name, dict(params or {})
        self.jobs = check_jobs(jobs)
        self.start = check_start(start)  # how a batch's workers start
        self._queue: list | None = None  # the runs started inside `batch`, waiting for its end
        self.out = Path(out) if out else None
        self.rows: list[dict] = []
        self.verdicts: list[dict] = []
        self.fields: dict[str, dict] = {}  # condition -> the fields its rows were run with (e.g. fraction=0.1)
        self.started = time.perf_counter()
        self._saved = self._resumable() if os.environ.get(RESUME_VARIABLE) == "1" else {}

    def _resumable(self) -> dict:
        """{(condition, seed, fields): metrics} of the rows an interrupted run with these params saved in `out`."""
        path = self.out / f"{self.name}.json" if self.out else None
        if path is None or not path.exists():
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"cannot resume from {path}: {e}; delete it to start this experiment afresh.") from None
        if json.loads(json.dumps(self.params, default=str)) != data.get("params"):
            return {}  # another run's rows (other parameters): started afresh, and overwritten when saved
        fields = data.get("fields", {})
        saved = {}
        for row in data.get("rows", []):
            named = fields.get(row["condition"], {})
            key = (row["condition"], row["seed"], json.dumps(named, sort_keys=True, default=str))
            saved[key] = {k: v for k, v in row.items() if k not in ("condition", "seed", *named)}
        return saved

    def add(self, condition: str, seed: int, metrics: dict, **fields) -> dict:
        self.fields[condition] = dict(fields)
        row = {"condition": condition, "seed": seed, **fields, **metrics}
        self.rows.append(row)
        self.save()
        return row

    def run(self, condition: str, fn: Callable[[int], dict], seeds: Iterable[int], known=None, **fields) -> list[dict]:
        """Call fn(seed) -> metrics for every seed; each row also gets `fields` (e.g. fraction=0.1) and wall time.
        `known`: {seed: metrics} of this very run made before (`choose_rates`' run of the rate it chose), not redone.

        Inside `with exp.batch():` the calls wait for the block's end, and the returned list fills then."""
        rows: list[dict] = []
        known = dict(known or {})
        named = json.dumps(fields, sort_keys=True, default=str)
        known.update({s: m for (c, s, f), m in self._saved.items() if c == condition and f == named and s not in known})
        runs = [(condition, seed, fields, rows, known.get(seed, lambda fn=fn, seed=seed: fn(seed))) for seed in seeds]
        if self._queue is not None:
            self._queue += runs
        else:
            self._finish(runs, jobs=1)  # outside a batch: here, one after another (a run may keep what it made)
        return rows

    @contextmanager
    def batch(self):
        """Runs started inside the block go `self.jobs` at a time when it ends; their rows are added in the order
        started, as if run one after another (a run must depend on its seed alone: `course.parallel`)."""
        if self._queue is not None:
            raise RuntimeError("exp.batch() blocks do not nest: start every run of the batch in one block.")
        self._queue = []
        try:
            yield self
            runs = self._queue
        finally:
            self._queue = None
        self._finish(runs)

    def _finish(self, runs: list, jobs: int | None = None) -> None:
        tasks = [task for *_, task in runs if callable(task)]
        results = run_tasks(tasks, self.jobs if jobs is None else jobs, start=self.start)
        for condition, seed, fields, rows, task in runs:  # a known run's metrics are its task
            rows.append(self.add(condition, seed, next(results) if callable(task) else dict(task), **fields))

    def train(self, condition: str, cfg, seeds: Iterable[int], data=None, model=None, **fields) -> list[dict]:
        """Train `cfg` once per seed (`train_run`); `data` and `model` may be callables of the seed."""
        return self.run(condition, train_run(cfg, data, model), seeds, **fields)

    def conditions(self) -> list[str]:
        return list(dict.fromkeys(r["condition"] for r in self.rows))

    def values(self, condition: str, metric: str = "test_acc") -> list[float]:
        vals = [r[metric] for r in self.rows if r["condition"] == condition and r.get(metric) is not None]
        if not vals:
            known = ", ".join(self.conditions()) or "none yet"
            raise KeyError(f"no {metric!r} values for condition {condition!r} (conditions: {known}).")
        return vals

    def summary(self, metric: str = "test_acc") -> list[dict]:
        """One row per condition, in the order run: its fields, n, mean, std, min and max of `metric`."""
        out = []
        for cond in self.conditions():
            rows = [r for r in self.rows if r["condition"] == cond and r.get(metric) is not None]
            if not rows:
                continue
            vals = [r[metric] for r in rows]
            m, s = mean_std(vals)
            described = dict(condition=cond, metric=metric, n=len(vals), mean=m, std=s, min=min(vals), max=max(vals))
            out.append({**self.fields.get(cond, {}), **described})
        return out

    def compare(
        self,
        a: str,
        b: str,
        metric: str = "test_acc",
        expect: str = "greater",
        margin: float | None = None,
        paired: bool = False,
        upstream: Iterable[str] = (),
    ) -> dict:
        """a - b of `metric` and the verdict on 'a <expect> b' (expect: 'greater', 'less', or 'equal' with a `margin`
        stated in advance): Welch's t, the paired t with `paired`, or TOST (`course.stats`); see `converged`."""
        if expect == "equal" and margin is None:
            raise ValueError("a claim of equality needs an equivalence margin stated in advance: pass margin=.")
        va, vb = self._paired(a, b, metric) if paired else (self.values(a, metric), self.values(b, metric))
        out = {"a": a, "b": b, "metric": metric, "expect": expect, "margin": margin, "n": min(len(va), len(vb))}
        out["compared"] = f"{a} {fmt(va)} vs {b} {fmt(vb)}"
        out["tested"] = a != b  # one condition against itself (two arms that chose one rate, say) tests nothing
        judged = tost(va, vb, margin, paired) if expect == "equal" else t_verdict(va, vb, expect, paired)
        return self.converged({**judged, **out}, (a, b), metric, upstream)

    def converged(
        self, out: dict, conditions: Iterable[str], metric: str = "test_acc", upstream: Iterable[str] = ()
    ) -> dict:
        """'inconclusive' (not converged) when most runs of `conditions`, or most of the `upstream` runs the arms start
        from, hit their step budget (stopped='budget'); the counts are recorded."""
        conditions, upstream = set(conditions), set(upstream)
        runs = [r for r in self.rows if r["condition"] in conditions and r.get(metric) is not None and "stopped" in r]
        before = [r for r in self.rows if r["condition"] in upstream and "stopped" in r]
        hits = [sum(r["stopped"] == "budget" for r in group) for group in (runs, before)]
        if runs or before:
            out["hit_budget"] = [sum(hits), len(runs) + len(before)]
            if before:
                out["upstream_hit_budget"] = [hits[1], len(before)]
            if 2 * hits[0] > len(runs) or 2 * hits[1] > len(before):
                out["judged"], out["verdict"], out["not_converged"] = out["verdict"], "inconclusive", True
        return out

    def _paired(self, a: str, b: str, metric: str) -> tuple[list[float], list[float]]:
        """The values of a and b for the seeds both have, in seed order (for a paired test)."""
        self.values(a, metric), self.values(b, metric)  # a KeyError names an unknown condition
        by_seed = [
            {r["seed"]: r[metric] for r in self.rows if r["condition"] == c and r.get(metric) is not None}
            for c in (a, b)
        ]
        seeds = sorted(set(by_seed[0]) & set(by_seed[1]))
        return [by_seed[0][s] for s in seeds], [by_seed[1][s] for s in seeds]

    def claim(self, claim_id: str, comparison: dict, why: str = "", tested: bool = True) -> dict:
        """The closing table's row for claim `claim_id` (course.paper_claims), judged by `comparison` (from `compare`,
        `stats.contrast` or `stats.all_of`); saved. When its two arms were one condition, or `tested=False`, the
        verdict is NOT_TESTED (the interval's kept as `measured`, left out of Holm)."""
        missing = [k for k in ("diff", "se", "low", "high", "p", "verdict", "n", "compared") if k not in comparison]
        if missing:
            raise ValueError(
                f"claim {claim_id!r}: the comparison lacks {', '.join(missing)}; judge it with Experiment.compare, "
                f"stats.contrast or stats.all_of (the course's t rule)."
            )
        if comparison["verdict"] not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got {comparison['verdict']!r}.")
        paper = CLAIMS[claim_id]  # a KeyError names an unknown claim
        tested = tested and comparison.get("tested", True)
        if comparison.get("not_converged"):  # the notebook's reason was written for the interval's verdict
            (hit, runs), alone = comparison["hit_budget"], comparison["judged"]
            first = comparison.get("upstream_hit_budget")
            of_first = f", {first[0]} of the {first[1]} the arms start from" if first else ""
            why = f"not converged: {hit} of {runs} runs hit their step budget{of_first} (the interval alone: {alone})"
        row = {
            "id": claim_id,
            "claim": paper["claim"],
            "paper": paper["paper"],
            "effect": comparison["diff"],
            "se": comparison["se"],
            "margin": comparison.get("margin"),
            "compared": comparison["compared"],
            **{k: comparison[k] for k in TEST_FIELDS if k in comparison},
            "verdict": comparison["verdict"] if tested else NOT_TESTED,
            **({} if tested else {"measured": comparison["verdict"]}),
            "seeds": comparison["n"],
            "why": why,
        }
        self.verdicts = [v for v in self.verdicts if v.get("id") != claim_id] + [row]
        self.save()
        return row

    def verdict_table(self) -> str:
        """The closing table as Markdown (display with IPython.display.Markdown)."""
        lines = [
            "| claim | paper | ours: effect [95% interval], p (the numbers compared) | verdict | why |",
            "|---|---|---|---|---|",
        ]
        for v in self.verdicts:
            ours = f"{interval_text(v)}; {v['compared']}"
            cells = (f"({v['id']}) {v['claim']}", v["paper"], ours, f"**{v['verdict']}**", v["why"])
            lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "experiment": self.name,
            "vitlib": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "threads": torch.get_num_threads(),
            "cpu": device_name(torch.device("cpu")),
            # the kernels PyTorch dispatches to (AVX2, AVX512, ...): a re-run on other kernels can differ in a run's
            # last bits and, over thousands of steps, in its numbers (course.replication)
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "gpu": device_name(torch.device("cuda")) if torch.cuda.is_available() else None,
            "minutes": (time.perf_counter() - self.started) / 60,
            "saved": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "params": self.params,
            "fields": self.fields,
            "rows": self.rows,
            "summary": {m: self.summary(m) for m in self._metrics()},
            "verdicts": self.verdicts,
        }

    def _metrics(self) -> list[str]:
        return [m for m in ("test_acc", "val_acc") if any(r.get(m) is not None for r in self.rows)]

    def save(self) -> Path | None:
        """Write out/<name>.json and out/<name>.csv (atomically: a crash leaves the previous files whole)."""
        if self.out is None:
            return None
        path = write_json(self.out / f"{self.name}.json", self.to_dict())
        if self.rows:
            write_csv(path.with_suffix(".csv"), self.rows)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Experiment:
        data = json.loads(Path(path).read_text())
        exp = cls(data["experiment"], None, data.get("params"))
        exp.rows, exp.verdicts, exp.fields = data["rows"], data.get("verdicts", []), data.get("fields", {})
        exp.started -= 60 * data.get("minutes", 0)  # a loaded experiment keeps counting from its own start
        exp.out = Path(path).parent
        return exp

    def errorbar(
        self,
        ax,
        x: str,
        metric: str = "test_acc",
        conditions: Iterable[str] | None = None,
        label: str | None = None,
        **kwargs,
    ):
        """Mean ± std of `metric` against the row field `x` (e.g. fraction), over the given conditions, as one line."""
        chosen = list(conditions) if conditions is not None else self.conditions()
        pts = []
        for cond in chosen:
            if x not in self.fields.get(cond, {}):
                raise KeyError(
                    f"condition {cond!r} was not run with the field {x!r} (its fields: {self.fields.get(cond)})."
                )
            m, s = mean_std(self.values(cond, metric))
            pts.append((self.fields[cond][x], m, s))
        pts.sort()
        xs, ms, ss = zip(*pts)
        return ax.errorbar(xs, ms, yerr=ss, capsize=3, marker="o", label=label, **kwargs)

    def bar(self, ax, metric: str = "test_acc", conditions: Iterable[str] | None = None, **kwargs):
        """Bars of mean ± std per condition, with every seed's value as a dot."""
        chosen = list(conditions) if conditions is not None else self.conditions()
        for i, cond in enumerate(chosen):
            vals = self.values(cond, metric)
            m, s = mean_std(vals)
            ax.bar(i, m, yerr=s, capsize=4, alpha=0.7, **kwargs)
            ax.plot([i] * len(vals), vals, "k.", ms=4)
        ax.set_xticks(range(len(chosen)), chosen, rotation=20, ha="right")
        ax.set_ylabel(metric)
        return ax
