"""An interval typed into the course's prose ("+0.013 [+0.004, +0.022]") is one that a committed run measured.

Results are written by scripts and notebooks, never typed; where the text quotes one (a reference verdict beside the
quick run a notebook prints, a verdict at an earlier budget), a re-run that moves the number must move the text too.
A typed interval passes when, at the digits it is typed with, it equals an interval recorded under results/ (a
verdict's low and high, in any run folder that belongs to the text), or one that a committed run's rows give for two
of its conditions (an observation a notebook prints and does not save: Welch's t or, seed by seed, the paired t)."""

import itertools
import json
import re
from functools import cache
from pathlib import Path

import pytest

from vitlib.studies.experiments import Experiment

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NUMBER = r"[+\-−]?\d+\.\d+"
INTERVAL = re.compile(rf"\[\s*({NUMBER}),\s*({NUMBER})\s*\]")


def typed_intervals(text: str) -> list[tuple[str, str, str]]:
    """(the interval as typed, its low, its high) for every '[low, high]' of two decimal numbers in `text`."""
    return [(m.group(0), m.group(1), m.group(2)) for m in INTERVAL.finditer(text)]


def agrees(typed: str, value: float) -> bool:
    """Whether `value` rounds to `typed` at the number of decimals it is typed with ('−0.05' for -0.0512, say)."""
    decimals = len(typed.split(".")[1])
    return abs(float(typed.replace("−", "-")) - value) <= 0.5 * 10**-decimals + 1e-12


def recorded(data) -> list[tuple[float, float]]:
    """Every (low, high) pair a results file records, at any depth (verdicts, replication records, budgets)."""
    if isinstance(data, dict):
        bounds = [data.get(k) for k in ("low", "high")]
        here = [tuple(bounds)] if all(isinstance(b, int | float) for b in bounds) else []
        return here + [pair for v in data.values() for pair in recorded(v)]
    if isinstance(data, list):
        return [pair for v in data for pair in recorded(v)]
    return []


@cache
def read(path: Path) -> dict:
    """A results file, parsed once for every test that looks into it."""
    return json.loads(path.read_text())


@cache
def recorded_in(path: Path) -> tuple[tuple[float, float], ...]:
    return tuple(recorded(read(path)))


@cache
def measured_in(path: Path) -> tuple[tuple[float, float], ...]:
    """The intervals of every two conditions of a committed experiment's test accuracy, unpaired and paired."""
    exp = Experiment.load(path)
    scored = [r["condition"] for r in exp.rows if r.get("test_acc") is not None]
    conditions = [c for c in exp.conditions() if scored.count(c) > 1]
    out = []
    for a, b in itertools.permutations(conditions, 2):
        for paired in (False, True):
            c = exp.compare(a, b, paired=paired)
            out.append((c["low"], c["high"]))
    return tuple(out)


def results_of(stem: str) -> list[Path]:
    """The results files that belong to notebook `stem` (e.g. '15_self_supervision'): its run folders at every scale,
    its budget variants and its replication records."""
    number = stem[:2]
    folders = list(RESULTS.glob(f"*/{stem}")) + list(RESULTS.glob(f"budgets/{number}_*"))
    files = [f for d in folders for f in sorted(d.rglob("*.json"))]
    return files + sorted(RESULTS.glob(f"replication/*_{number}_*.json"))


def unmatched(text: str, files: list[Path]) -> list[str]:
    """The intervals typed in `text` that no file in `files` records or measures."""

    def fits(low: str, high: str, pairs) -> bool:
        return any(agrees(low, lo) and agrees(high, hi) for lo, hi in pairs)

    experiments = [f for f in files if "rows" in read(f)]
    return [
        typed
        for typed, low, high in typed_intervals(text)
        if not any(fits(low, high, recorded_in(f)) for f in files)
        and not any(fits(low, high, measured_in(f)) for f in experiments)
    ]


def test_an_interval_is_found_at_the_digits_it_is_typed_with():
    assert typed_intervals("reproduced +0.013 [+0.004, +0.022], p 0.011; (−0.054 [−0.074,\n  −0.033])") == [
        ("[+0.004, +0.022]", "+0.004", "+0.022"),
        ("[−0.074,\n  −0.033]", "−0.074", "−0.033"),
    ]
    assert agrees("+0.004", 0.003804) and agrees("+0.0005", 0.00049) and agrees("−0.05", -0.0512)
    assert not agrees("+0.004", 0.0034) and not agrees("-0.004", 0.004)


def test_a_stale_interval_is_caught(tmp_path):
    """The test's own check: an interval a run records, or its rows give, passes; one moved by a digit does not."""
    exp = Experiment("toy", tmp_path)
    for seed, (a, b) in enumerate([(0.80, 0.70), (0.82, 0.71), (0.85, 0.75)]):
        exp.add("a", seed, {"test_acc": a})
        exp.add("b", seed, {"test_acc": b})
    unpaired, paired = exp.compare("a", "b"), exp.compare("a", "b", paired=True)
    exp.claim("a1", unpaired)  # recorded: the verdict's interval; measured only: the paired one
    path = exp.save()
    typed = lambda c, nudge=0.0: f"[{c['low'] + nudge:+.3f}, {c['high']:+.3f}]"  # noqa: E731
    assert unmatched(f"{typed(unpaired)} and {typed(paired)}", [path]) == []
    assert unmatched(typed(paired, nudge=0.002), [path]) == [typed(paired, nudge=0.002)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_interval_in_a_notebooks_prose_is_one_its_runs_measured(path):
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    missing = unmatched(text, results_of(path.stem))
    assert missing == [], (
        f"{path.name}: its markdown types the intervals {missing}, which no committed run under results/ records or "
        f"measures; a re-run moved them: type what results/ now holds (or print it from there)."
    )


@pytest.mark.parametrize("page", ["README.md", "results/README.md"])
def test_an_interval_in_a_readme_is_one_a_committed_run_measured(page):
    files = sorted(RESULTS.rglob("*.json"))
    missing = unmatched((ROOT / page).read_text(), files)
    assert missing == [], f"{page} types the intervals {missing}, which no committed run under results/ records"
