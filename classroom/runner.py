"""Grade a class: find what each student submitted, record the instructor's answers, grade every student in a sandbox.

First the instructor's source of each assignment runs once in a sandbox, recording the expected answers (data kept
in the grader's private folder). Then one sandboxed job per student and assignment, `workers` at a time, each in a
scratch folder of its own (numbered, whatever the student's name): the student's code only computes answers as
data; `verdict.judge` compares them here. A job past its time limit is killed with every process it started; what
it had answered so far still counts.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from . import folders, library, sandbox, worker


class ClassroomError(ValueError):
    """A usage error: the message says what was wrong and what to do."""


def catalogue(source: Path) -> dict[str, Path]:
    """Assignment name -> instructor source: every NN_*.ipynb in `source`, and the library assignment."""
    if not source.is_dir():
        raise ClassroomError(f"no instructor notebooks at {source}: pass --source with the course's notebooks folder.")
    found = {p.stem: p for p in sorted(source.glob("[0-9][0-9]_*.ipynb"))}
    if not found:
        raise ClassroomError(
            f"{source} holds no notebooks named NN_*.ipynb: pass --source with the course's notebooks."
        )
    return {**found, **({library.ASSIGNMENT: library.SOURCE} if library.SOURCE.is_file() else {})}


def submitted_file(student_dir: Path, assignment: str) -> tuple[Path | None, str]:
    """The student's file for an assignment and a note on how it was found: the exact name, else (notebooks) the one
    file whose name starts with the same two digits, such as '01_patches (1).ipynb' from a second download."""
    name = library.FILENAME if assignment == library.ASSIGNMENT else assignment + ".ipynb"
    try:
        files = [
            p for p, mode in folders.walk(student_dir) if stat.S_ISREG(mode) and ".ipynb_checkpoints" not in p.parts
        ]
    except (ValueError, OSError):
        return None, f"not submitted: {student_dir.name}/ could not be searched (see the folder's other rows)"
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
    cell_timeout: float = 600.0  # seconds a cell (or a library call) may run
    timeout: float = 3600.0  # seconds one student's notebook (or library file) may take in all
    workers: int = os.cpu_count() or 1
    kernel: str = "python3"
    parameters: dict | None = None
    workdir: Path | None = None  # where the jobs run (a temporary folder by default, removed at the end)
    keep: bool = False  # keep the jobs' folders (executed notebooks, logs)
    progress: bool = True
    instructor: Path | None = None  # the library assignment's instructor folder (default: library.HERE)
    hidden: Path | None = None  # extra hidden checks: HIDDEN/<notebook>/<exercise number>.py
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)


def find_class(submissions: Path, source: Path, assignments: list[str] | None):
    """(students, assignments, catalogue) for a submissions folder; clear errors for what cannot be graded."""
    if not submissions.is_dir():
        raise ClassroomError(
            f"{submissions} is not a folder: SUBMISSIONS must hold one folder per student "
            f"(SUBMISSIONS/<student>/01_patches.ipynb, ...)."
        )
    students = sorted(p.name for p in submissions.iterdir() if p.is_dir() and not p.is_symlink())
    students = [s for s in students if not s.startswith(".")]
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


def skipped_folders(submissions: Path) -> list[dict]:
    """Rows for what is in SUBMISSIONS but not graded: folders starting with '.', links, files."""
    rows = []
    for p in sorted(submissions.iterdir()):
        if p.is_dir() and not p.is_symlink() and not p.name.startswith("."):
            continue
        why = (
            "a folder whose name starts with '.' is not graded: rename it"
            if p.is_dir() and not p.is_symlink()
            else "not a student folder (a link or a file): put each student's files in a folder of their own"
        )
        rows.append(dict(student=p.name, assignment="-", exercise="-", title="-", points=0, max_points=0,
                         status="error", message=f"not graded: {why}"))  # fmt: skip
        print(f"warning: {p.name}: {why}", file=sys.stderr)
    return rows


def _record_all(assignments, cat, root: Path, options: Options, common: dict) -> dict[str, Path]:
    uids = sandbox.allocate_uids(len(assignments))
    jobs = {
        a: dict(
            common,
            assignment=a,
            source=str(cat[a]),
            kind="library" if a == library.ASSIGNMENT else "notebook",
            dir=str(root / "instructor" / a),
            log=str(root / "logs" / f"instructor-{a}.log"),
            uid=uids[k] if os.geteuid() == 0 else None,
            instructor=str(options.instructor or library.HERE),
            hidden_dir=options.hidden,
            notebooks=str(cat[a].parent) if a != library.ASSIGNMENT else None,  # the instructor's, for its own run
        )
        for k, a in enumerate(assignments)
    }
    recorded = {}
    with ThreadPoolExecutor(max(1, options.workers)) as pool:
        futures = {pool.submit(worker.record, job, options.limits): a for a, job in jobs.items()}
        for future in as_completed(futures):
            try:
                recorded[futures[future]] = future.result()
            except ValueError as exc:
                raise ClassroomError(str(exc)) from exc
    for a, folder in recorded.items():
        for line in worker.check_recorded(folder, jobs[a]):
            print(f"warning: {line}", file=sys.stderr)
    return recorded


def grade_class(
    submissions: Path, source: Path, assignments: list[str] | None = None, options: Options | None = None
) -> list[dict]:
    """Grade every student of `submissions` on `assignments` (default: those any student submitted); one dict per
    student, assignment and exercise, in that order (then a row for each folder that was not graded)."""
    options = options or Options()
    submissions, source = Path(submissions).resolve(), Path(source).resolve()
    students, assignments, cat = find_class(submissions, source, assignments)
    try:
        sandbox.check()
    except sandbox.SandboxError as exc:
        raise ClassroomError(str(exc)) from exc
    if options.limits.cgroup and not sandbox.cgroup.available():
        print("warning: no cgroup can be made for each job here (needs root with cgroup v1, or a delegated v2): "
              "CPU, memory and processes are limited per process only", file=sys.stderr)  # fmt: skip
    # the instructor's recordings and the students' jobs in two roots: no path from a job's folder leads to them
    root = Path(tempfile.mkdtemp(prefix="classroom-", dir=options.workdir))
    jobs_root = Path(tempfile.mkdtemp(prefix="classroom-jobs-", dir=options.workdir))
    (root / "logs").mkdir()
    common = dict(cell_timeout=options.cell_timeout, timeout=options.timeout, kernel=options.kernel,
                  parameters=options.parameters)  # fmt: skip
    try:
        recorded = _record_all(assignments, cat, root, options, common)
        common["notebooks"] = str(_released_view(source, root / "released"))
        jobs = _jobs(students, assignments, cat, submissions, jobs_root, root / "logs", recorded, common)
        rows = _run_jobs(jobs, len(students), options)
    finally:
        if options.keep:
            print(f"the graded notebooks and logs are kept in {root} and {jobs_root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(jobs_root, ignore_errors=True)
    order = {(j["student"], j["assignment"]): i for i, j in enumerate(jobs)}
    rows.sort(key=lambda r: order[(r["student"], r["assignment"])])
    return rows + skipped_folders(submissions)


def _released_view(source: Path, out: Path) -> Path:
    """The student versions of the notebooks: what a student's sandbox sees at the course's notebooks/ (a notebook
    that reads its own file, like 00, then reads the released one, never the instructor's)."""
    import nbformat

    from .notebooks import release_notebook

    out.mkdir(parents=True)
    for path in sorted(source.glob("[0-9][0-9]_*.ipynb")):
        try:
            nbformat.write(release_notebook(nbformat.read(path, as_version=4), path.name), out / path.name)
        except ValueError:
            continue  # not releasable: not there
    return out


def _jobs(students, assignments, cat, submissions: Path, jobs_root: Path, logs: Path, recorded, common) -> list[dict]:
    jobs, uids = [], sandbox.allocate_uids(len(students) * len(assignments))
    for student in students:
        refused = folders.check_plain(submissions / student)
        for assignment in assignments:
            path, note = submitted_file(submissions / student, assignment) if not refused else (None, "")
            n = len(jobs) + 1
            jobs.append(
                dict(
                    common,
                    student=student,
                    assignment=assignment,
                    source=str(cat[assignment]),
                    kind="library" if assignment == library.ASSIGNMENT else "notebook",
                    submission=str(path) if path else None,
                    missing=None if path else note,
                    note=note if path else None,
                    refused=refused,
                    student_dir=str(submissions / student),
                    dir=str(jobs_root / f"{n:05d}"),  # numbered: no two students share a folder
                    log=str(logs / f"{n:05d}.log"),
                    uid=uids[n - 1] if os.geteuid() == 0 else None,  # as root: a user id of its own
                    recorded=str(recorded[assignment]),
                )
            )
    return jobs


def _run_jobs(jobs: list[dict], n_students: int, options: Options) -> list[dict]:
    rows, left = [], Counter(job["student"] for job in jobs)
    leftover = 0
    with (
        ThreadPoolExecutor(max(1, options.workers)) as pool,
        tqdm(total=n_students, unit="student", desc="grading", disable=not options.progress) as bar,
    ):
        futures = {pool.submit(worker.grade, job, options.limits): job for job in jobs}
        for future in as_completed(futures):
            job = futures[future]
            result = future.result()
            seconds = job.get("seconds", 0.0)
            rows.extend({"student": job["student"], "assignment": job["assignment"], "seconds": seconds, **r}
                        for r in result)  # fmt: skip
            leftover += job.get("leftover", 0)
            left[job["student"]] -= 1
            if left[job["student"]] == 0:
                bar.update(1)
    if leftover:
        print(f"warning: {leftover} process(es) outlived their sandbox and were killed", file=sys.stderr)
    return rows
