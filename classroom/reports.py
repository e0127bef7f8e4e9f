"""The reports of a graded class: grades.csv, one feedback file per student, and a class summary with a histogram."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from vitlib.utils import write_csv

COLUMNS = ["student", "assignment", "exercise", "points", "max_points", "status", "message"]


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) else str(x)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def totals(rows: list[dict]) -> dict[str, tuple[float, float]]:
    out = defaultdict(lambda: [0, 0])
    for r in rows:
        out[r["student"]][0] += r["points"]
        out[r["student"]][1] += r["max_points"]
    return {s: tuple(v) for s, v in out.items()}


def feedback(student: str, rows: list[dict]) -> str:
    """A student's feedback in markdown: every exercise with its points and, when not passed, what went wrong."""
    got, out_of = totals(rows)[student]
    lines = [f"# Feedback for {student}", "", f"**Total: {_num(got)} / {_num(out_of)} points**", ""]
    by_assignment = defaultdict(list)
    for r in rows:
        by_assignment[r["assignment"]].append(r)
    for assignment, items in by_assignment.items():
        a_got, a_max = sum(r["points"] for r in items), sum(r["max_points"] for r in items)
        lines += [
            f"## {assignment}: {_num(a_got)} / {_num(a_max)}",
            "",
            "| exercise | points | status | what to look at |",
            "| --- | --- | --- | --- |",
        ]
        for r in items:
            title = r.get("title") or r["exercise"]
            lines.append(
                f"| {_cell(title)} | {_num(r['points'])} / {_num(r['max_points'])} | {r['status']} | "
                f"{_cell(r['message']) if r['status'] != 'passed' else _cell(r['message'] or 'correct')} |"
            )
        lines.append("")
    return "\n".join(lines)


def summary(rows: list[dict], seconds: float | None = None) -> str:
    """The class in markdown: points per student, pass rate per exercise, a text histogram of the totals."""
    tot = totals(rows)
    lines = [
        "# Class summary",
        "",
        f"{len(tot)} students" + (f", graded in {seconds:.0f} s" if seconds else ""),
        "",
        "## Points per student",
        "",
        "| student | points | out of | % |",
        "| --- | --- | --- | --- |",
    ]
    for s, (got, out_of) in sorted(tot.items()):
        lines.append(f"| {_cell(s)} | {_num(got)} | {_num(out_of)} | {100 * got / out_of if out_of else 0:.0f} |")
    lines += [
        "",
        "## Pass rate per exercise",
        "",
        "| assignment | exercise | passed | failed | error | timeout | pass rate |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    per = defaultdict(lambda: defaultdict(int))
    titles = {}
    for r in rows:
        key = (r["assignment"], r["exercise"])
        per[key][r["status"]] += 1
        titles[key] = r.get("title") or r["exercise"]
    for key, counts in per.items():
        n = sum(counts.values())
        lines.append(
            f"| {key[0]} | {_cell(titles[key])} | {counts['passed']} | {counts['failed']} | {counts['error']} "
            f"| {counts['timeout']} | {100 * counts['passed'] / n:.0f}% |"
        )
    jobs = {(r["student"], r["assignment"]): r.get("seconds") for r in rows if r.get("seconds")}
    if jobs:
        lines += [
            "",
            "## Grading time per assignment (seconds per student)",
            "",
            "| assignment | mean | max |",
            "| --- | --- | --- |",
        ]
        per_assignment = defaultdict(list)
        for (_, assignment), sec in jobs.items():
            per_assignment[assignment].append(sec)
        for assignment, secs in per_assignment.items():
            lines.append(f"| {assignment} | {sum(secs) / len(secs):.0f} | {max(secs):.0f} |")
    lines += ["", "## Histogram of the totals (% of the points)", "", "![histogram](histogram.png)", "", "```"]
    bins = histogram_bins(tot)
    for label, count in bins:
        lines.append(f"{label:>8} | {'#' * count} {count}")
    lines += ["```", ""]
    return "\n".join(lines)


def histogram_bins(tot: dict) -> list[tuple[str, int]]:
    counts = [0] * 10
    for got, out_of in tot.values():
        pct = 100 * got / out_of if out_of else 0
        counts[min(9, int(pct // 10))] += 1
    return [(f"{10 * i}-{10 * i + 10}%" if i < 9 else "90-100%", c) for i, c in enumerate(counts)]


def histogram_png(tot: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pcts = [100 * g / m if m else 0 for g, m in tot.values()]
    fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
    ax.hist(pcts, bins=range(0, 101, 10), color="tab:blue", edgecolor="white")
    ax.set(xlabel="total (% of the points)", ylabel="students", title=f"{len(pcts)} students", xlim=(0, 100))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def readable(text: str) -> str:
    """`text` as UTF-8 can hold it: the bytes of a folder name that is not UTF-8 (Latin-1, say) as \\xNN escapes."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def feedback_name(student: str, limit: int = 200) -> str:
    """The feedback file's name for `student`: a name too long for the file system is cut and keeps a digest."""
    if len(student.encode()) + 3 <= limit:
        return f"{student}.md"
    cut = student.encode()[: limit - 20].decode(errors="ignore")
    return f"{cut}-{hashlib.sha256(student.encode()).hexdigest()[:12]}.md"


def write_reports(rows: list[dict], out: Path, seconds: float | None = None) -> dict[str, Path]:
    """grades.csv, feedback/<student>.md, summary.md and histogram.png under `out`, each written to a temporary file
    next to it and renamed into place (a reader never sees half a report). Called once grading is over: every
    sandbox is gone by then."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "feedback").mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".reports-", dir=out))
    try:
        (tmp / "feedback").mkdir()
        rows = [{**r, "student": readable(r["student"]), "message": readable(str(r.get("message", "")))} for r in rows]
        cells = [{**r, "points": _num(r["points"]), "max_points": _num(r["max_points"])} for r in rows]
        write_csv(tmp / "grades.csv", cells, COLUMNS, escape_formulas=True)  # names and messages come from students
        by_student = defaultdict(list)
        for r in rows:
            by_student[r["student"]].append(r)
        for student, items in by_student.items():
            (tmp / "feedback" / feedback_name(student)).write_text(feedback(student, items))
        (tmp / "summary.md").write_text(summary(rows, seconds))
        histogram_png(totals(rows), tmp / "histogram.png")
        for path in sorted(tmp.rglob("*")):
            if path.is_file():
                os.replace(path, out / path.relative_to(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"grades": out / "grades.csv", "feedback": out / "feedback", "summary": out / "summary.md"}
