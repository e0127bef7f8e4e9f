"""Grade a class: find what each student submitted, run one process per student and assignment, `workers` at a time.

Each job runs `vitlib.classroom.worker.main` in a process of its own, in a private folder with a copy of the student's
folder; a job that runs past its time limit is killed with its kernel, and what it had graded so far is kept (the rest
is `timeout`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import psutil
from tqdm.auto import tqdm

from . import library, worker


class ClassroomError(ValueError):
    """A usage error: the message says what was wrong and what to do."""


def course_root() -> Path:
    """The course's folder: the one above the vitlib package (notebooks/ and data/ live there)."""
    return Path(__file__).resolve().parent.parent.parent


def catalogue(source: Path) -> dict[str, Path]:
    """Assignment name -> instructor source: every NN_*.ipynb in `source`, and the library assignment."""
    if not source.is_dir():
        raise ClassroomError(f"no instructor notebooks at {source}: pass --source with the course's notebooks folder.")
    found = {p.stem: p for p in sorted(source.glob("[0-9][0-9]_*.ipynb"))}
    if not found:
        raise ClassroomError(
            f"{source} holds no notebooks named NN_*.ipynb: pass --source with the course's notebooks."
        )
    return {**found, library.ASSIGNMENT: library.SOURCE}


def submitted_file(student_dir: Path, assignment: str) -> tuple[Path | None, str]:
    """The student's file for an assignment and a note on how it was found: the exact name, else (notebooks) the one
    file whose name starts with the same two digits, such as '01_patches (1).ipynb' from a second download."""
    name = library.FILENAME if assignment == library.ASSIGNMENT else assignment + ".ipynb"
    files = [p for p in student_dir.rglob("*") if p.is_file() and ".ipynb_checkpoints" not in p.parts]
    exact = sorted((p for p in files if p.name == name), key=lambda p: len(p.parts))
    if exact:
        return exact[0], ""
    if assignment != library.ASSIGNMENT:
        similar = [p for p in files if p.suffix == ".ipynb" and p.name[:2] == assignment[:2] and p.name[2:3] in "_ -"]
        if len(similar) == 1:
            return similar[0], f"graded {similar[0].name} as {name}"
    return None, f"not submitted: no {name} in {student_dir.name}/"


@dataclass
class Options:
    cell_timeout: float = 600.0  # seconds a cell (or a library test) may run
    timeout: float = 3600.0  # seconds one student's notebook (or library file) may take in all
    workers: int = os.cpu_count() or 1
    kernel: str = "python3"
    parameters: dict | None = None
    workdir: Path | None = None  # where the jobs run (a temporary folder by default, removed at the end)
    keep: bool = False  # keep the jobs' folders (executed notebooks, logs)
    progress: bool = True


def find_class(submissions: Path, source: Path, assignments: list[str] | None):
    """(students, assignments, catalogue) for a submissions folder; clear errors for what cannot be graded."""
    if not submissions.is_dir():
        raise ClassroomError(
            f"{submissions} is not a folder: SUBMISSIONS must hold one folder per student "
            f"(SUBMISSIONS/<student>/01_patches.ipynb, ...)."
        )
    students = sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise ClassroomError(
            f"{submissions} holds no student folders: put each student's files in {submissions}/<student>/."
        )
    cat = catalogue(source)
    if assignments:
        unknown = [a for a in assignments if a not in cat]
        if unknown:
            raise ClassroomError(f"unknown assignment(s) {', '.join(unknown)}: choose among {', '.join(cat)}.")
        return students, assignments, cat
    seen = [a for a in cat if any(submitted_file(submissions / s, a)[0] for s in students)]
    if not seen:
        raise ClassroomError(
            f"no student folder in {submissions} holds a course notebook (NN_name.ipynb) or "
            f"{library.FILENAME}: nothing to grade."
        )
    return students, seen, cat


# The worker needs nbformat and papermill, not torch: it loads vitlib.classroom without running vitlib/__init__.py
# (which imports torch), a few seconds saved per job. The kernels and the tests import vitlib as usual.
_WORKER = (
    "import sys, types; vitlib = types.ModuleType('vitlib'); vitlib.__path__ = [sys.argv[2]]; "
    "sys.modules['vitlib'] = vitlib; from vitlib.classroom.worker import main; sys.exit(main(sys.argv[1:2]))"
)
_VITLIB_DIR = str(Path(__file__).resolve().parent.parent)


def _kill_tree(pid: int) -> None:
    try:
        parent = psutil.Process(pid)
        procs = parent.children(recursive=True) + [parent]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _run_job(job: dict) -> list[dict]:
    if not job["submission"]:  # nothing to run: the rows say what is missing
        rows = worker.grade_library(job) if job["kind"] == "library" else worker.plan(job)[3]
        return [{"student": job["student"], "assignment": job["assignment"], "seconds": 0.0, **r} for r in rows]
    job_dir = Path(job["dir"])
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "job.json").write_text(json.dumps(job))
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.monotonic()
    with open(job_dir / "worker.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(job_dir / "job.json"), _VITLIB_DIR],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=job_dir,
        )
        try:
            proc.wait(timeout=job["timeout"])
            stopped = None if proc.returncode == 0 else f"the grader process ended with code {proc.returncode}"
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            stopped = f"timeout: past the limit of {job['timeout']:g} s per student and assignment"
    results = job_dir / "results.json"
    rows = (
        json.loads(results.read_text())
        if stopped is None and results.exists()
        else worker.results_after_stop(job, stopped or "no results")
    )
    seconds = round(time.monotonic() - start, 1)
    return [{"student": job["student"], "assignment": job["assignment"], "seconds": seconds, **r} for r in rows]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def grade_class(
    submissions: Path, source: Path, assignments: list[str] | None = None, options: Options | None = None
) -> list[dict]:
    """Grade every student of `submissions` on `assignments` (default: those any student submitted); one dict per
    student, assignment and exercise, in that order."""
    options = options or Options()
    submissions, source = Path(submissions).resolve(), Path(source).resolve()
    students, assignments, cat = find_class(submissions, source, assignments)
    root = Path(tempfile.mkdtemp(prefix="classroom-", dir=options.workdir))
    jobs = []
    for student in students:
        for assignment in assignments:
            path, note = submitted_file(submissions / student, assignment)
            jobs.append(
                dict(
                    student=student,
                    assignment=assignment,
                    source=str(cat[assignment]),
                    kind="library" if assignment == library.ASSIGNMENT else "notebook",
                    submission=str(path) if path else None,
                    missing=None if path else note,
                    note=note if path else None,
                    student_dir=str(submissions / student),
                    dir=str(root / _safe(student) / _safe(assignment)),
                    cell_timeout=options.cell_timeout,
                    timeout=options.timeout,
                    kernel=options.kernel,
                    parameters=options.parameters,
                )
            )
    rows, left = [], Counter(job["student"] for job in jobs)
    try:
        with (
            ThreadPoolExecutor(max(1, options.workers)) as pool,
            tqdm(total=len(students), unit="student", desc="grading", disable=not options.progress) as bar,
        ):
            futures = {pool.submit(_run_job, job): job["student"] for job in jobs}
            for future in as_completed(futures):
                rows.extend(future.result())
                left[futures[future]] -= 1
                if left[futures[future]] == 0:
                    bar.update(1)
    finally:
        if options.keep:
            print(f"the graded notebooks and logs are kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    order = {(s, a): i for i, (s, a) in enumerate((j["student"], j["assignment"]) for j in jobs)}
    rows.sort(key=lambda r: order[(r["student"], r["assignment"])])
    return rows
