"""Grade one student's one assignment, in a process of its own (the runner calls `main([JOB.json])`).

The job (a JSON file written by the runner) names the instructor's source, the student's file (or none), the student's
folder and a private folder for this job. The student's folder is copied there first, and the notebook runs in that
copy, so nothing a student's code writes reaches the submissions or another student. The results go to `results.json`.
"""

from __future__ import annotations

import json
import shutil
import sys
import traceback
from pathlib import Path

import nbformat

from . import library
from .notebooks import grading_notebook, parse_exercises
from .results import notebook_results


def _rows_for_all(exercises, status: str, message: str) -> list[dict]:
    return [
        dict(exercise=str(e.number), title=e.title, points=0, max_points=e.points, status=status, message=message)
        for e in exercises
    ]


def read_student_notebook(path: Path):
    """The student's notebook, or a ValueError saying what is wrong with the file and what to do."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises NotJSONError, JSONDecodeError, UnicodeDecodeError, ...
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ValueError(
            f"{path.name} is not a readable notebook ({type(exc).__name__}: {detail}); download the "
            f"released notebook again and copy your answers into it"
        ) from exc
    if not isinstance(nb.get("cells"), list):
        raise ValueError(f"{path.name} has no list of cells: it is not a Jupyter notebook")
    return nb


def plan(job: dict):
    """(exercises, grading notebook or None, notes, rows when there is nothing to run) for a notebook job."""
    instructor = nbformat.read(job["source"], as_version=4)
    exercises = parse_exercises(instructor, Path(job["source"]).name)
    if not job.get("submission"):
        return exercises, None, {}, _rows_for_all(exercises, "error", job.get("missing") or "not submitted")
    try:
        student = read_student_notebook(Path(job["submission"]))
    except ValueError as exc:
        return exercises, None, {}, _rows_for_all(exercises, "error", str(exc))
    nb, notes = grading_notebook(instructor, student, exercises)
    if job.get("note"):
        notes = {e.key: "; ".join(filter(None, [notes.get(e.key), job["note"]])) for e in exercises}
    return exercises, nb, notes, None


def results_after_stop(job: dict, stopped: str) -> list[dict]:
    """Results from what a stopped job left (the executed notebook is saved after every cell)."""
    if job["kind"] == "library":
        return library.junit_results(None, stopped)
    exercises, _, notes, rows = plan(job)
    if rows is not None:
        return rows
    graded = Path(job["dir"]) / "graded.ipynb"
    nb = nbformat.read(graded, as_version=4) if graded.exists() else None
    return notebook_results(nb, exercises, notes, job["cell_timeout"], stopped)


def grade_notebook(job: dict) -> list[dict]:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    exercises, nb, notes, rows = plan(job)
    if rows is not None:
        return rows
    job_dir = Path(job["dir"])
    work = job_dir / "work"
    grading, graded = job_dir / "grading.ipynb", job_dir / "graded.ipynb"
    nbformat.write(nb, grading)
    stopped = None
    try:
        papermill.execute_notebook(
            str(grading),
            str(graded),
            parameters=job.get("parameters") or None,
            kernel_name=job.get("kernel", "python3"),
            cwd=str(work),
            progress_bar=False,
            execution_timeout=job["cell_timeout"],
            allow_errors=True,
            interrupt_on_timeout=True,
            start_timeout=120,
        )
    except PapermillExecutionError:
        pass  # errors in the student's cells or in failing checks are what grading reads
    except Exception as exc:  # the kernel died (a student's os._exit), could not start, ...
        stopped = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip(": ")
    executed = nbformat.read(graded, as_version=4) if graded.exists() else None
    return notebook_results(executed, exercises, notes, job["cell_timeout"], stopped)


def grade_library(job: dict) -> list[dict]:
    if not job.get("submission"):
        return [
            dict(
                exercise=k,
                title=t,
                points=0,
                max_points=p,
                status="error",
                message=job.get("missing") or "not submitted",
            )
            for k, t, p in library.EXERCISES
        ]
    return library.run_pytest(Path(job["submission"]), Path(job["dir"]) / "lib", job["timeout"], job["cell_timeout"])


def run(job: dict) -> list[dict]:
    job_dir = Path(job["dir"])
    if job.get("student_dir"):
        shutil.copytree(
            job["student_dir"],
            job_dir / "work",
            symlinks=True,
            ignore=shutil.ignore_patterns(".ipynb_checkpoints"),
            dirs_exist_ok=True,
        )
        if job.get("submission"):  # grade the copy: the original stays as it was submitted
            job["submission"] = str(job_dir / "work" / Path(job["submission"]).relative_to(job["student_dir"]))
    return grade_library(job) if job["kind"] == "library" else grade_notebook(job)


def main(argv: list[str]) -> int:
    job_file = Path(argv[0])
    job = json.loads(job_file.read_text())
    try:
        rows = run(job)
    except Exception:
        rows = None
        (Path(job["dir"]) / "grader-error.txt").write_text(traceback.format_exc())
    if rows is None:
        msg = f"the grader failed on this submission (details in {Path(job['dir']) / 'grader-error.txt'})"
        try:
            rows = [{**r, "status": "error", "message": msg} for r in results_after_stop(job, "grader error")]
        except Exception:
            rows = [dict(exercise="?", title="?", points=0, max_points=0, status="error", message=msg)]
    (Path(job["dir"]) / "results.json").write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
