"""Grade a synthetic class of honest and hostile students and time it (issue 61: 29 folders took 274 s).

The class is the hostile class of the grader's tests (every cheat it must not fall for, and honest students beside
them), copied until it has --students folders. Prints a markdown table: students, workers, wall time, seconds per
student and how many students did not get exactly the points their honest work earns (0 expected).

    .venv/bin/python benchmarks/grade_class.py --students 100 --workers 2
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "classroom" / "tests"))


def synthetic_class(root: Path, students: int) -> dict[str, float]:
    """root/submissions with `students` folders (the hostile class, repeated) for root/source; expected points."""
    from classroom_fixtures import hostile_class

    base = hostile_class(root)
    subs = root / "submissions"
    folders = sorted(p for p in subs.iterdir() if p.is_dir() and p.name in base)
    expected, copy = dict(base), 1
    while len(expected) < students:
        for folder in folders:
            if len(expected) >= students:
                break
            name = f"{folder.name}-{copy}"
            shutil.copytree(folder, subs / name, symlinks=True)
            expected[name] = base[folder.name]
        copy += 1
    return expected


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", type=int, default=100, help="folders in the class (at least the hostile class's)")
    p.add_argument("--workers", type=int, default=2, help="students graded at once")
    p.add_argument("--timeout", type=float, default=120, help="seconds per student and assignment")
    args = p.parse_args(argv)
    if args.students < 1 or args.workers < 1:
        p.error("--students and --workers must be at least 1")
    with tempfile.TemporaryDirectory(prefix="grade-class-") as tmp:
        root = Path(tmp)
        expected = synthetic_class(root, args.students)
        cmd = [sys.executable, "-m", "classroom", "grade", str(root / "submissions"), "--out", str(root / "reports")]
        cmd += ["--source", str(root / "source"), "--cell-timeout", "20", "--timeout", str(args.timeout)]
        cmd += ["--workers", str(args.workers), "--no-progress"]
        start = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.monotonic() - start
        if run.returncode != 0:
            print(run.stderr[-3000:], file=sys.stderr)
            return 1
        got: dict[str, float] = {}
        with open(root / "reports" / "grades.csv") as f:
            for r in csv.DictReader(f):
                got[r["student"]] = got.get(r["student"], 0) + float(r["points"])
        wrong = sorted(s for s, points in expected.items() if not s.startswith(("=", ".")) and got.get(s) != points)
    print("| students | workers | wall s | s / student | wrong totals |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {len(expected)} | {args.workers} | {wall:.0f} | {wall / len(expected):.1f} | {len(wrong)} |")
    if wrong:
        print("wrong:", ", ".join(wrong[:20]), file=sys.stderr)
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
