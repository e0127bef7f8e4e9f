"""Does a re-run reproduce a committed run? Row by row (matched by condition and seed) and verdict by verdict.

A sweep gives bit-identical numbers run after run on one machine (`parallel`). On another machine the CPU kernels
PyTorch picks can differ (oneDNN's convolutions and MKL's matrix products choose by instruction set and cache sizes),
the last bits of a sum differ, and over a few thousand steps such bits can move a run's early stop and its accuracy.
`compare_runs` says which of the two it is: identical rows, or how far the numbers moved and whether each verdict
kept its class.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

# what a run's row records about time rather than about learning: machine- and load-dependent, never compared
TIMING_SUFFIXES, TIMING_FIELDS = ("_s", "_ms"), ("ms", "minutes")
MACHINE_FIELDS = ("saved", "vitlib", "torch", "python", "cpu", "cpu_capability", "threads", "gpu", "minutes")


def is_timing(field: str) -> bool:
    """wall_s, time_s, images_per_s, ms, ... (but not `params` or `steps`)."""
    return field.endswith(TIMING_SUFFIXES) or field in TIMING_FIELDS


def _load(run: dict | str | Path) -> dict:
    return run if isinstance(run, dict) else json.loads(Path(run).read_text())


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def compare_runs(committed: dict | str | Path, rerun: dict | str | Path) -> dict:
    """Compare two saved Experiment files (paths or their JSON) of the same notebook and preset.

    Returns the machines each names, the rows matched by (condition, seed) and how many are identical in every
    field but the timings (and in test accuracy), the largest difference of each numeric field, per condition the
    same for test accuracy, and every verdict before and after (its class, effect and interval)."""
    a, b = _load(committed), _load(rerun)
    if a.get("experiment") != b.get("experiment"):
        raise ValueError(
            f"these are two different experiments ({a.get('experiment')!r} and {b.get('experiment')!r}): compare a "
            "run with a re-run of the same notebook's same experiment file."
        )
    key = lambda r: (r.get("condition"), r.get("seed"))  # noqa: E731
    rows_a, rows_b = {key(r): r for r in a.get("rows", [])}, {key(r): r for r in b.get("rows", [])}
    matched = [k for k in rows_a if k in rows_b]
    rows = _compare_rows([(k[0], rows_a[k], rows_b[k]) for k in matched])
    by_condition = rows["by_condition"]
    return {
        "experiment": a.get("experiment"),
        "machines": {
            "committed": {f: a.get(f) for f in MACHINE_FIELDS},
            "rerun": {f: b.get(f) for f in MACHINE_FIELDS},
        },
        "rows": {
            "matched": len(matched),
            "identical": sum(c["identical"] for c in by_condition.values()),
            "same_test_acc": sum(c["same_test_acc"] for c in by_condition.values()),
            "only_committed": len(rows_a) - len(matched),
            "only_rerun": len(rows_b) - len(matched),
        },
        **rows,
        "verdicts": _compare_verdicts(a.get("verdicts", []), b.get("verdicts", [])),
    }


def row_differences(ra: dict, rb: dict) -> dict[str, float]:
    """The absolute difference of every numeric field two rows share, timings left out."""
    fields = [f for f in ra if f in rb and not is_timing(f)]
    return {f: abs(ra[f] - rb[f]) for f in fields if _number(ra[f]) and _number(rb[f])}


def largest_differences(pairs) -> dict[str, float]:
    """Per numeric field, the largest difference over (row, row) pairs (0.0 where every pair agrees)."""
    largest: dict[str, float] = {}
    for ra, rb in pairs:
        for f, d in row_differences(ra, rb).items():
            largest[f] = max(largest.get(f, 0.0), d)
    return largest


def _compare_rows(pairs: list[tuple]) -> dict:
    """(condition, committed row, re-run row) -> the fields that differ, each field's largest difference, and per
    condition how many rows are identical, keep their test accuracy, and how far test accuracy moved."""
    max_diff = largest_differences((ra, rb) for _, ra, rb in pairs)
    differs: set[str] = set()
    by_condition: dict[str, dict] = {}
    for condition, ra, rb in pairs:
        fields = [f for f in dict.fromkeys([*ra, *rb]) if not is_timing(f)]
        changed = [f for f in fields if not _same(ra.get(f), rb.get(f))]
        differs.update(changed)
        diffs = row_differences(ra, rb)
        c = by_condition.setdefault(
            str(condition), {"rows": 0, "identical": 0, "same_test_acc": 0, "max_test_acc_diff": 0.0}
        )
        c["rows"] += 1
        c["identical"] += not changed
        c["same_test_acc"] += "test_acc" not in changed
        c["max_test_acc_diff"] = max(c["max_test_acc_diff"], diffs.get("test_acc", 0.0))
    return {
        "fields_that_differ": sorted(differs),
        "max_diff": {f: d for f, d in sorted(max_diff.items()) if d},
        "by_condition": by_condition,
    }


def _compare_verdicts(committed: list[dict], rerun: list[dict]) -> list[dict]:
    """Every verdict of either run: its class, effect, interval and p before and after, and whether the class held."""
    va, vb = {v["id"]: v for v in committed}, {v["id"]: v for v in rerun}

    def side(v):
        return None if v is None else {f: v.get(f) for f in ("verdict", "effect", "low", "high", "p")}

    return [
        {
            "id": vid,
            "committed": side(va.get(vid)),
            "rerun": side(vb.get(vid)),
            "same_verdict": vid in va and vid in vb and va[vid].get("verdict") == vb[vid].get("verdict"),
        }
        for vid in dict.fromkeys([*va, *vb])
    ]


def _verdict_text(side: dict | None) -> str:
    if side is None:
        return "absent"
    if _number(side.get("low")) and _number(side.get("high")):
        return f"{side['verdict']} {side['effect']:+.4f} [{side['low']:+.4f}, {side['high']:+.4f}]"
    return f"{side['verdict']} {side['effect']:+.4f}" if _number(side.get("effect")) else str(side.get("verdict"))


def report(comparison: dict) -> str:
    """The comparison as lines of text: machines, rows, the fields that moved, each condition, each verdict."""
    c = comparison
    lines = [f"experiment {c['experiment']}"]
    for who, m in c["machines"].items():
        minutes = m.get("minutes")
        lines.append(
            f"  {who:9s} {m.get('saved')} | cpu {m.get('cpu')} ({m.get('cpu_capability') or 'kernels not recorded'}) | "
            f"torch {m.get('torch')} | {m.get('threads')} thread(s) | "
            + (f"{minutes:.1f} min" if _number(minutes) else "minutes not recorded")
        )
    r = c["rows"]
    lines.append(
        f"rows: {r['matched']} matched by (condition, seed), {r['identical']} identical in every field but the "
        f"timings, {r['same_test_acc']} with the same test accuracy"
        + (f"; {r['only_committed']} only in the committed run" if r["only_committed"] else "")
        + (f"; {r['only_rerun']} only in the re-run" if r["only_rerun"] else "")
    )
    if c["max_diff"]:
        lines.append("largest differences: " + ", ".join(f"{f} {d:.4g}" for f, d in c["max_diff"].items()))
    for cond, s in c["by_condition"].items():
        if s["identical"] < s["rows"]:
            lines.append(
                f"  {cond}: {s['identical']} of {s['rows']} rows identical, {s['same_test_acc']} with the same test "
                f"accuracy, at most {s['max_test_acc_diff']:.4f} apart"
            )
    for v in c["verdicts"]:
        same = "same verdict" if v["same_verdict"] else "VERDICT CHANGED"
        lines.append(f"  {v['id']}: {_verdict_text(v['committed'])} -> {_verdict_text(v['rerun'])} ({same})")
    return "\n".join(lines)
