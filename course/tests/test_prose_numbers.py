"""An interval typed into the course's prose ("+0.013 [+0.004, +0.022], p 0.011; 0.23 after Holm"), with the p-value
and Holm-adjusted p typed after it, is one that a committed run measured.

Results are written by scripts and notebooks, never typed; where the text quotes one (a reference verdict beside the
quick run a notebook prints, a verdict at an earlier budget), a re-run that moves the number must move the text too.
A typed interval passes when, at the digits it is typed with, it equals an interval recorded under results/ (a
verdict's low and high, in any run folder that belongs to the text, or the claims report's line for one of the
notebook's claims), or one that a committed run's rows give for two of its conditions (an observation a notebook
prints and does not save: Welch's t or, seed by seed, the paired t). A p-value or Holm value typed after it must be
the one recorded with that same interval."""

import itertools
import json
import re
from functools import cache
from pathlib import Path

import pytest

from course.experiments import Experiment

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NUMBER = r"[+\-−]?\d+\.\d+"
P_VALUE = r"\d+(?:\.\d+)?(?:e[+\-−]?\d+)?"
# '[low, high]', then optionally ', p 0.011' or ' (p 0.011' (a p after anything else is not its p), then optionally
# '; 0.23 after Holm' or ', Holm 0.23'
INTERVAL = re.compile(
    rf"\[\s*({NUMBER}),\s*({NUMBER})\s*\]"
    rf"(?:(?:,\s*|\s+\()p\s*=?\s*({P_VALUE})(?:[;,]\s*(?:({P_VALUE})\s+after\s+Holm|Holm\s+({P_VALUE})))?)?"
)
Typed = tuple[str, str, str, str | None, str | None]  # as typed, low, high, p, Holm's p


def typed_intervals(text: str) -> list[Typed]:
    """(the interval as typed, its low, its high, the p and Holm's p typed after it or None) for every '[low, high]'
    of two decimal numbers in `text`."""
    return [(m.group(0), m[1], m[2], m[3], m[4] or m[5]) for m in INTERVAL.finditer(text)]


def agrees(typed: str, value: float) -> bool:
    """Whether `value` rounds to `typed` at the digits it is typed with ('−0.05' for -0.0512, '4.4e-07' for 4.4e-7)."""
    typed = typed.replace("−", "-")
    mantissa, _, exponent = typed.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return abs(float(typed) - value) <= 0.5 * 10 ** (int(exponent or 0) - decimals) * (1 + 1e-9) + 1e-12


Record = tuple[float, float, float | None, float | None]  # low, high, p, Holm's p


def recorded(data) -> list[Record]:
    """Every (low, high, p, Holm's p) a results file records, at any depth (verdicts, replication records, budgets,
    the claims report); p and Holm's p are None where the record has none."""
    if isinstance(data, dict):
        bounds = [data.get(k) for k in ("low", "high")]
        number = lambda k: data.get(k) if isinstance(data.get(k), int | float) else None  # noqa: E731
        here = [(*bounds, number("p"), number("p_holm"))] if all(isinstance(b, int | float) for b in bounds) else []
        return here + [record for v in data.values() for record in recorded(v)]
    if isinstance(data, list):
        return [record for v in data for record in recorded(v)]
    return []


@cache
def read(path: Path) -> dict:
    """A results file, parsed once for every test that looks into it."""
    return json.loads(path.read_text())


@cache
def recorded_in(path: Path, notebook: str | None = None) -> tuple[Record, ...]:
    """What `path` records; of the claims report, only the claims of `notebook` when one is named."""
    data = read(path)
    if notebook is not None and path.name == "claims.json":
        data = [c for c in data["claims"] if c["notebook"] == notebook]
    return tuple(recorded(data))


@cache
def measured_in(path: Path) -> tuple[Record, ...]:
    """The intervals of every two conditions of a committed experiment's test accuracy, unpaired and paired."""
    exp = Experiment.load(path)
    scored = [r["condition"] for r in exp.rows if r.get("test_acc") is not None]
    conditions = [c for c in exp.conditions() if scored.count(c) > 1]
    out = []
    for a, b in itertools.permutations(conditions, 2):
        for paired in (False, True):
            c = exp.compare(a, b, paired=paired)
            out.append((c["low"], c["high"], c["p"], None))
    return tuple(out)


def results_of(stem: str) -> list[Path]:
    """The results files that belong to notebook `stem` (e.g. '15_self_supervision'): its run folders at every scale,
    its budget variants, its replication records and the claims report (of which only its own claims count)."""
    number = stem[:2]
    folders = list(RESULTS.glob(f"*/{stem}")) + list(RESULTS.glob(f"budgets/{number}_*"))
    files = [f for d in folders for f in sorted(d.rglob("*.json"))]
    return files + sorted(RESULTS.glob(f"replication/*_{number}_*.json")) + [RESULTS / "claims.json"]


def unmatched(text: str, files: list[Path], notebook: str | None = None) -> list[str]:
    """The intervals typed in `text` (with the p-value and Holm's p typed after them) that no file in `files`
    records or measures."""

    def fits(typed: Typed, records) -> bool:
        _, *numbers = typed
        return any(
            all(t is None or (r is not None and agrees(t, r)) for t, r in zip(numbers, record, strict=True))
            for record in records
        )

    experiments = [f for f in files if {"experiment", "rows"} <= set(read(f))]  # not a benchmark's rows
    return [
        typed[0]
        for typed in typed_intervals(text)
        if not any(fits(typed, recorded_in(f, notebook)) for f in files)
        and not any(fits(typed, measured_in(f)) for f in experiments)
    ]


def test_an_interval_is_found_at_the_digits_it_is_typed_with():
    text = (
        "reproduced +0.013 [+0.004, +0.022] (p 0.011; 0.23 after Holm's correction); (−0.054 [−0.074,\n  −0.033]); "
        "+0.461 [+0.409, +0.513], p 4.4e-07, Holm 1; [0.1, 0.2]; p 0.5"
    )
    assert typed_intervals(text) == [
        ("[+0.004, +0.022] (p 0.011; 0.23 after Holm", "+0.004", "+0.022", "0.011", "0.23"),
        ("[−0.074,\n  −0.033]", "−0.074", "−0.033", None, None),
        ("[+0.409, +0.513], p 4.4e-07, Holm 1", "+0.409", "+0.513", "4.4e-07", "1"),
        ("[0.1, 0.2]", "0.1", "0.2", None, None),
    ]
    assert agrees("+0.004", 0.003804) and agrees("+0.0005", 0.00049) and agrees("−0.05", -0.0512)
    assert not agrees("+0.004", 0.0034) and not agrees("-0.004", 0.004)
    assert agrees("4.4e-07", 4.38e-07) and agrees("0.23", 0.231) and agrees("1", 1.0)
    assert not agrees("4.4e-07", 4.3e-07) and not agrees("0.23", 0.236) and not agrees("4.4e-07", 4.4e-06)


def test_a_stale_interval_is_caught(tmp_path):
    """The test's own check: an interval a run records, or its rows give, passes with its own p-value; one moved by
    a digit, or typed with another p-value or another Holm value, does not."""
    exp = Experiment("toy", tmp_path)
    for seed, (a, b) in enumerate([(0.80, 0.70), (0.82, 0.71), (0.85, 0.75)]):
        exp.add("a", seed, {"test_acc": a})
        exp.add("b", seed, {"test_acc": b})
    unpaired, paired = exp.compare("a", "b"), exp.compare("a", "b", paired=True)
    exp.claim("a1", unpaired)  # recorded: the verdict's interval; measured only: the paired one
    path = exp.save()
    report = tmp_path / "claims.json"  # a claims report's line for the claim, with Holm's p
    report.write_text(json.dumps({"claims": [{"notebook": "toy", "reference": {"ours": {**unpaired, "p_holm": 0.4}}}]}))

    def typed(c, nudge=0.0, p=None, holm=None):
        text = f"[{c['low'] + nudge:+.3f}, {c['high']:+.3f}]"
        text += f", p {c['p'] if p is None else p:.2g}"
        return text + (f"; {holm} after Holm" if holm is not None else "")

    assert unmatched(f"{typed(unpaired)} and {typed(paired)}", [path]) == []
    assert unmatched(typed(unpaired, holm=0.4), [path, report], notebook="toy") == []
    bench = tmp_path / "bench.json"  # a benchmark's rows are no experiment's: looked past, not loaded
    bench.write_text(json.dumps({"rows": [{"model": "vit", "ms": 1.0}]}))
    assert unmatched(typed(paired, nudge=0.002), [path, bench]) == [typed(paired, nudge=0.002)]
    assert unmatched(typed(paired, p=paired["p"] * 1.5), [path]) == [typed(paired, p=paired["p"] * 1.5)]
    assert unmatched(typed(unpaired, holm=0.5), [path, report], notebook="toy") != []
    assert unmatched(typed(unpaired, holm=0.4), [path, report], notebook="other") != []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_interval_in_a_notebooks_prose_is_one_its_runs_measured(path):
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    missing = unmatched(text, results_of(path.stem), notebook=path.stem)
    assert missing == [], (
        f"{path.name}: its markdown types the intervals {missing}, which no committed run under results/ records or "
        f"measures; a re-run moved them: type what results/ now holds (or print it from there)."
    )


@pytest.mark.parametrize("page", ["README.md", "results/README.md"])
def test_an_interval_in_a_readme_is_one_a_committed_run_measured(page):
    files = sorted(RESULTS.rglob("*.json"))
    missing = unmatched((ROOT / page).read_text(), files)
    assert missing == [], f"{page} types the intervals {missing}, which no committed run under results/ records"
