"""python -m classroom {release,grade,check,points}: the course as graded assignments (README, "For
instructors")."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from vitlib.utils import command_line

from .runner import ClassroomError, Options
from .sandbox import Limits, course_root


def _source(value: str | None) -> Path:
    if value:
        return Path(value)
    here = Path("notebooks")
    return here if here.is_dir() else course_root() / "notebooks"


def _grading_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", help="the instructor's notebooks folder (default: ./notebooks, else the course's)")
    p.add_argument(
        "--assignments",
        nargs="+",
        metavar="NAME",
        help="e.g. 01_patches vit_from_scratch (default: every assignment some student submitted)",
    )
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="students graded at once (default: cores)")
    p.add_argument("--cell-timeout", type=float, default=600, help="seconds a cell or a library test may run (600)")
    p.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds one student's notebook (or library file) may take in all (3600)",
    )
    p.add_argument("--kernel", default="python3", help="Jupyter kernel that runs the notebooks (python3)")
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        default=[],
        help="a papermill parameter for every notebook, e.g. -p preset quick (numbers are parsed)",
    )
    p.add_argument(
        "--instructor",
        help="the library assignment's instructor folder with its solution and tests (default: classroom/instructor)",
    )
    p.add_argument(
        "--hidden", help="extra hidden checks kept outside the course: HIDDEN/<notebook>/<exercise number>.py"
    )
    p.add_argument("--memory-gb", type=float, default=6.0, help="address space per sandboxed process in GB (6)")
    p.add_argument("--keep", action="store_true", help="keep the executed notebooks and logs (the path is printed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _options(args) -> Options:
    return Options(
        cell_timeout=args.cell_timeout,
        timeout=args.timeout,
        workers=args.workers,
        kernel=args.kernel,
        parameters={k: _value(v) for k, v in args.parameter} or None,
        keep=args.keep,
        progress=not args.no_progress,
        instructor=Path(args.instructor).resolve() if args.instructor else None,
        hidden=Path(args.hidden).resolve() if args.hidden else None,
        limits=Limits(memory_gb=args.memory_gb),
    )


def cmd_release(args) -> int:
    from .release import release_all

    start = time.perf_counter()
    written = release_all(_source(args.source), Path(args.out), args.assignments)
    print(f"released {len(written)} files to {args.out} in {time.perf_counter() - start:.1f} s")
    return 0


def cmd_grade(args) -> int:
    from .reports import write_reports
    from .runner import grade_class

    start = time.perf_counter()
    rows = grade_class(Path(args.submissions), _source(args.source), args.assignments, _options(args))
    seconds = time.perf_counter() - start
    paths = write_reports(rows, Path(args.out), seconds)
    students = len({r["student"] for r in rows})
    print(
        f"graded {students} students in {seconds:.0f} s: {paths['grades']}, {paths['summary']}, "
        f"{paths['feedback']}/<student>.md"
    )
    return 0


def cmd_check(args) -> int:
    from . import library
    from .check import build_class, compare
    from .reports import write_reports
    from .runner import catalogue, grade_class

    source = _source(args.source)
    assignments = args.assignments or list(catalogue(source))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="check-assignments-"))
    expected = build_class(source, out, assignments)
    start = time.perf_counter()
    rows = grade_class(out / "submissions", source, assignments, _options(args))
    seconds = time.perf_counter() - start
    write_reports(rows, out / "reports", seconds)
    problems = compare(rows, expected)
    print(f"graded {len(assignments)} assignments for 3 students in {seconds:.0f} s (reports in {out / 'reports'})")
    for line in problems:
        print("MISMATCH", line)
    if not problems:
        print(
            f"all as expected: instructor full marks, released zero, partial exactly its answers "
            f"({', '.join(a for a in assignments if a != library.ASSIGNMENT)[:80]}...)"
        )
    return 1 if problems else 0


def cmd_points(args) -> int:
    from .release import points_table

    for name, number, title, points in points_table(_source(args.source)):
        print(f"{name:28s} {number:2d}  {points:g}  {title}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m classroom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("release", help="write the student versions (notebooks, library starter and visible tests)")
    p.add_argument("--source", help="the instructor's notebooks folder (default: ./notebooks, else the course's)")
    p.add_argument("--out", default="assignments/release", help="output folder (assignments/release)")
    p.add_argument("--assignments", nargs="+", metavar="NAME", help="only these (default: all)")
    p.set_defaults(run=cmd_release)
    p = sub.add_parser("grade", help="grade SUBMISSIONS/<student>/ and write the reports to --out")
    p.add_argument("submissions", help="folder with one folder per student")
    p.add_argument("--out", required=True, help="folder for grades.csv, feedback/ and summary.md")
    _grading_args(p)
    p.set_defaults(run=cmd_grade)
    p = sub.add_parser("check", help="grade a synthetic class (instructor, released, partial) and verify the scores")
    p.add_argument("--out", help="folder for the class and its reports (default: a temporary folder)")
    _grading_args(p)
    p.set_defaults(run=cmd_check)
    p = sub.add_parser("points", help="list every exercise with its points")
    p.add_argument("--source", help="the instructor's notebooks folder")
    p.set_defaults(run=cmd_points)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ClassroomError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(command_line(main))
