"""One job of the grader: record the instructor's answers for an assignment, or grade one student's one assignment.

Each job has a scratch folder of its own (root/jobs/NNNN): the student's files are copied there (plain files and
folders only), with what the sandbox needs in .classroom/ (capture.py, inside.py, the job, the instructor's recorded
inputs, the grading notebook). The sandbox sees only that folder, at /home/student. What comes back is data: the
answers (JSON), the executed notebook (for the feedback messages); the points come from `verdict.judge` here.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import nbformat

from . import expected as exp
from . import folders, library, limited, sandbox, verdict
from .notebooks import grading_notebook, parse_exercises
from .results import notebook_results

HERE = Path(__file__).resolve().parent
HOME = exp.HOME


def _scratch(job: dict, files: dict[str, bytes | str] | None = None) -> Path:
    scratch = Path(job["dir"])
    (scratch / ".classroom" / "inputs").mkdir(parents=True, exist_ok=True)
    (scratch / ".classroom" / "answers").mkdir(exist_ok=True)
    (scratch / ".classroom" / "expected").mkdir(exist_ok=True)
    (scratch / "work").mkdir(exist_ok=True)
    for name in ("capture.py", "encoding.py", "inside.py"):
        shutil.copyfile(HERE / name, scratch / ".classroom" / name)
    for name, data in (files or {}).items():
        (scratch / ".classroom" / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return scratch


def _run(job: dict, scratch: Path, inner: dict, limits: sandbox.Limits) -> sandbox.Outcome:
    (scratch / ".classroom" / "job.json").write_text(json.dumps(inner))
    sandbox.prepare(scratch, job.get("uid"))
    argv = [sys.executable, f"{exp.CLASSROOM}/inside.py", f"{exp.CLASSROOM}/job.json"]
    views = {job["notebooks"]: sandbox.course_notebooks()} if job.get("notebooks") else None
    return sandbox.run(scratch, argv, job["timeout"], Path(job["log"]), job.get("uid"), limits, views)


def _notebook_job(job: dict, nb_path: str, allow_errors: bool) -> dict:
    return dict(
        mode="notebook",
        input=f"{exp.CLASSROOM}/{nb_path}",
        output=f"{exp.CLASSROOM}/graded.ipynb",
        cwd=f"{HOME}/work",
        parameters=job.get("parameters"),
        kernel=job.get("kernel", "python3"),
        cell_timeout=job["cell_timeout"],
        allow_errors=allow_errors,
    )


def _stopped_text(scratch: Path) -> str:
    raw = verdict.read_beneath(scratch, ".classroom/stopped.txt", limit=2**20)
    return raw.decode(errors="replace")[:500] if raw else ""


# -- the instructor's answers ------------------------------------------------------------------------------------------


def record(job: dict, limits: sandbox.Limits) -> Path:
    """Run the instructor's source (notebook or library tests) in a sandbox; return the folder with expected/ and
    inputs/ (kept outside every student's sandbox). A ValueError says what failed."""
    scratch = _scratch(job)
    if job["kind"] == "library":
        folder = Path(job["instructor"])
        for path in (
            folder / library.FILENAME,
            folder / library.VISIBLE_TESTS.name,
            folder / library.HIDDEN_TESTS.name,
        ):
            shutil.copyfile(path, scratch / "work" / path.name)
        tests = [library.VISIBLE_TESTS.name, library.HIDDEN_TESTS.name]
        inner = dict(mode="record-library", cwd=f"{HOME}/work", tests=tests, hidden_file=library.HIDDEN_TESTS.name)
    else:
        nb = nbformat.read(job["source"], as_version=4)
        exercises = parse_exercises(nb, Path(job["source"]).name)
        extra = exp.extra_hidden_checks(job.get("hidden_dir"), Path(job["source"]).stem, exercises)
        names = {e.key: exp.answer_names(nb, e, extra.get(e.number, [])) for e in exercises}
        empty = [e.number for e in exercises if not names[e.key]]
        if empty:
            raise ValueError(f"{Path(job['source']).name}: exercise(s) {empty} define no name their checks use")
        nbformat.write(exp.recording_notebook(nb, exercises, names, extra), scratch / ".classroom" / "record.ipynb")
        (scratch / ".classroom" / "names.json").write_text(json.dumps(names))
        inner = _notebook_job(job, "record.ipynb", allow_errors=False)
    outcome = _run(job, scratch, inner, limits)
    stopped = _stopped_text(scratch) or (None if outcome.returncode == 0 else f"exit code {outcome.returncode}")
    if outcome.returncode is None:
        stopped = f"past the time limit of {job['timeout']:g} s"
    if stopped:
        raise ValueError(f"the instructor's {job['assignment']} could not be recorded: {stopped} (log: {job['log']})")
    return scratch / ".classroom"


def check_recorded(folder: Path, job: dict) -> list[str]:
    """Warnings on what the instructor's run recorded: exercises with nothing to compare, values compared by type."""
    warnings = []
    for path in sorted((folder / "expected").glob("*.json")):
        data = verdict.load(path.parent, path.name) or {}
        if not data.get("values") and not data.get("calls"):
            warnings.append(f"{job['assignment']} {path.stem}: nothing recorded (the checks call no answer)")
        objects = [n for n, v in data.get("values", {}).items() if v and v[0] == "object"]
        calls = data.get("calls", [])
        objects += sorted({f"{c['name']}(...)" for c in calls if (c.get("out") or [""])[0] == "object"})
        if objects:
            warnings.append(f"{job['assignment']} {path.stem}: {objects} can only be compared by their type")
        called = {c["name"] for c in calls}
        uncalled = sorted(
            {c["name"] for c in calls if c.get("out") == ["callable"] and c["name"] + "(...)" not in called}
        )
        if uncalled:
            warnings.append(f"{job['assignment']} {path.stem}: {uncalled} return a function the checks never call "
                            "(any function passes: call it in a check)")  # fmt: skip
    return warnings


# -- one student ----------------------------------------------------------------------------------------------------


def _rows_for_all(exercises, status: str, message: str) -> list[dict]:
    return [
        dict(exercise=str(e.number), title=e.title, points=0, max_points=e.points, status=status, message=message)
        for e in exercises
    ]


def _library_rows(status: str, message: str) -> list[dict]:
    return [
        dict(exercise=k, title=t, points=0, max_points=p, status=status, message=message)
        for k, t, p in library.EXERCISES
    ]


def read_student_notebook(path: Path):
    """The student's notebook, or a ValueError saying what is wrong with the file and what to do."""
    try:
        if path.stat().st_size > 64 * 2**20:
            raise ValueError("larger than 64 MB")
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


def grade(job: dict, limits: sandbox.Limits) -> list[dict]:
    """The rows of one student's one assignment; never raises (a grader error is an error row, traceback in the
    job's log), so one odd submission cannot stop the class."""
    try:
        return _grade(job, limits)
    except Exception:
        import traceback

        with open(job["log"], "a") as log:
            log.write("\n" + traceback.format_exc())
        message = f"the grader failed on this submission (details in {job['log']} with --keep)"
        if job["kind"] == "library":
            return _library_rows("error", message)
        return _rows_for_all(parse_exercises(nbformat.read(job["source"], as_version=4)), "error", message)


def _grade(job: dict, limits: sandbox.Limits) -> list[dict]:
    is_library = job["kind"] == "library"
    exercises = None if is_library else parse_exercises(nbformat.read(job["source"], as_version=4))
    fail = (lambda s, m: _library_rows(s, m)) if is_library else (lambda s, m: _rows_for_all(exercises, s, m))
    if job.get("refused"):
        return fail("error", job["refused"])
    if not job["submission"]:
        return fail("error", job.get("missing") or "not submitted")
    scratch = _scratch(job)
    try:
        folders.copy_plain(Path(job["student_dir"]), scratch / "work")
    except folders.SubmissionError as exc:
        return fail("error", str(exc))
    relative = Path(job["submission"]).relative_to(job["student_dir"])
    if is_library:
        return _grade_library(job, scratch, relative, limits)
    return _grade_notebook(job, scratch, relative, exercises, limits)


def _grading(source: str, submitted: Path, recorded: Path, exercises: list) -> tuple:
    """The grading notebook and notes for a student's notebook (run by `limited.call`: the file is the student's)."""
    instructor = nbformat.read(source, as_version=4)
    student = read_student_notebook(submitted)
    names = json.loads((recorded / "names.json").read_text())
    return grading_notebook(instructor, student, exercises, hidden=False, capture=exp.capture_cells(exercises, names))


def _judge_notebook(scratch: Path, recorded: Path, exercises: list, notes: dict, cell_timeout, stopped) -> list[dict]:
    """The rows from what the sandbox wrote back (run by `limited.call`: the student's code wrote it)."""
    try:
        raw = verdict.read_beneath(scratch, ".classroom/graded.ipynb")
        graded = nbformat.reads(raw.decode(), as_version=4) if raw else None
    except Exception:  # what the sandbox wrote is only read for messages: unreadable is no message
        graded = None
    messages = notebook_results(graded, exercises, notes, cell_timeout, stopped)
    rows = []
    for e, row in zip(exercises, messages):
        expected = verdict.load(recorded, f"expected/{exp.key_file(e)}.json") or {}
        answers = verdict.load(scratch, f".classroom/answers/{exp.key_file(e)}.json")
        rows.append(merge(row, verdict.judge(expected, answers, rtol=e.rtol), e.points, notes.get(e.key)))
    return rows


def _grade_notebook(job, scratch, relative, exercises, limits) -> list[dict]:
    recorded = Path(job["recorded"])
    try:
        nb, notes = limited.call(_grading, job["source"], scratch / "work" / relative, recorded, exercises)
    except ValueError as exc:
        return _rows_for_all(exercises, "error", str(exc))
    except limited.LimitExceeded as exc:
        return _rows_for_all(exercises, "error", f"not graded: your notebook is too large for the grader ({exc})")
    if job.get("note"):
        notes = {e.key: "; ".join(filter(None, [notes.get(e.key), job["note"]])) for e in exercises}
    nbformat.write(nb, scratch / ".classroom" / "grading.ipynb")
    for path in (recorded / "inputs").glob("*.pkl"):
        shutil.copyfile(path, scratch / ".classroom" / "inputs" / path.name)
    outcome = _run(job, scratch, _notebook_job(job, "grading.ipynb", allow_errors=True), limits)
    job["leftover"], job["seconds"] = outcome.leftover, outcome.seconds
    stopped = None
    if outcome.returncode is None:
        stopped = f"timeout: past the limit of {job['timeout']:g} s per student and assignment"
    elif _stopped_text(scratch):
        stopped = _stopped_text(scratch)
    try:
        return limited.call(_judge_notebook, scratch, recorded, exercises, notes, job["cell_timeout"], stopped)
    except limited.LimitExceeded as exc:
        why = f"not graded: what your notebook wrote is too large for the grader ({exc})"
        return _rows_for_all(exercises, "error", why)


def merge(row: dict, judged: tuple[str, str, bool], points: float, note: str | None) -> dict:
    """The points from the verdict; the message from the executed notebook when it says more."""
    status, message, hidden = judged
    if status == "passed":
        return {**row, "points": points, "status": "passed", "message": note or ""}
    vague = row["message"].startswith("not graded") and not message.startswith("not graded")
    if row["status"] != "passed" and not vague:
        return {**row, "points": 0}
    prefix = "a hidden check: " if hidden else "checked against the instructor's answers: "
    text = message if message.startswith("not graded") else prefix + message
    return {**row, "points": 0, "status": status, "message": f"{text} ({note})" if note else text}


def _library_source(scratch: Path, relative: Path) -> tuple[bytes | None, str | None]:
    """The student's file as submitted, read before it runs (the rules are checked on the code that ran), or why it
    is refused."""
    refused = library.shadowing(scratch / "work" / relative.parent)
    if refused:
        return None, refused
    raw = verdict.read_beneath(scratch, Path("work") / relative, limit=library.MAX_SOURCE_BYTES)
    if raw is None:
        return None, f"{library.FILENAME} is over {library.MAX_SOURCE_BYTES:,} bytes or not a plain file: not graded"
    return raw, None


def _grade_library(job, scratch, relative, limits) -> list[dict]:
    recorded = Path(job["recorded"])
    source, refused = _library_source(scratch, relative)
    if refused:
        return _library_rows("error", refused)
    shutil.copyfile(recorded / "inputs" / "library.pkl", scratch / ".classroom" / "inputs" / "library.pkl")
    cwd = f"{HOME}/work/{relative.parent.as_posix()}".rstrip("/.")
    inner = dict(mode="replay-library", cwd=cwd, module=library.ASSIGNMENT, cell_timeout=job["cell_timeout"])
    outcome = _run(job, scratch, inner, limits)
    job["leftover"], job["seconds"] = outcome.leftover, outcome.seconds
    if verdict.read_beneath(scratch, Path("work") / relative, limit=library.MAX_SOURCE_BYTES) != source:
        return _library_rows(
            "error", f"{library.FILENAME} changed while it ran: submit a file that does not rewrite it"
        )
    rules = library.rule_violations(source.decode(errors="replace"))
    try:
        return limited.call(_judge_library, scratch, recorded, outcome.returncode is None, rules)
    except limited.LimitExceeded as exc:
        return _library_rows("error", f"not graded: what your file wrote is too large for the grader ({exc})")


def _judge_library(scratch: Path, recorded: Path, timed_out: bool, rules: dict) -> list[dict]:
    """The rows from the answers the sandbox wrote back (run by `limited.call`)."""
    answers = verdict.load(scratch, ".classroom/answers/library.json")
    if answers and answers.get("import_error"):
        return _library_rows("error", f"the tests could not import your file: {str(answers['import_error'])[:300]}")
    expected = verdict.load(recorded, "expected/library.json") or {}
    calls = expected.get("calls", [])
    rows = []
    for key, title, points in library.EXERCISES:
        mine = [i for i, c in enumerate(calls) if library.exercise_of(c.get("test", "")) == key]
        row = dict(exercise=key, title=title, points=0, max_points=points)
        status, message, _ = verdict.judge(expected, answers, mine) if mine else ("error", "nothing recorded", False)
        if answers is None or (timed_out and status == "error"):
            status = "timeout" if timed_out else "error"
            why = "past the time limit" if status == "timeout" else "no results"
            message = f"not graded: your file did not finish ({why})"
        if status == "passed" and key in rules:
            status, message = "failed", f"hidden test rule: {rules[key]}"
        rows.append({**row, "points": points if status == "passed" else 0, "status": status, "message": message})
    return rows
