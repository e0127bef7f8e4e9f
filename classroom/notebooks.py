"""Exercises in the course's notebooks: find them, release a student version, build the notebook that grades one.

An exercise in an instructor notebook is one or more cells tagged `exercise` (a statement and a code stub), then a
cell tagged `solution`, then one or more cells tagged `exercise-check`, then optionally cells tagged `hidden-check`
(only in the instructor's notebook). Its points are `metadata.course.points` (default 1); its identity is the `id` of
its first exercise code cell (JupyterLab keeps it while a student edits), else its order.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import nbformat

from . import verdict

EXERCISE, SOLUTION, CHECK, HIDDEN = "exercise", "solution", "exercise-check", "hidden-check"
BANNER = (
    "**Student version.** The solutions are removed: write your answers in the cells marked `# TODO`. "
    "Run a check cell after your answer to see whether it is right. Keep the exercise and check cells where "
    "they are (you may add cells of your own): the grader runs the original checks, and some hidden ones, "
    "after each of your exercises."
)


def tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@dataclass
class Exercise:
    number: int  # 1, 2, ... in the order of the notebook
    key: str  # id of its first exercise code cell (or "exercise-<number>")
    title: str
    points: float
    cell_ids: list[str]  # ids of its exercise cells
    checks: list = field(default_factory=list)  # the instructor's exercise-check cells
    hidden: list = field(default_factory=list)  # the instructor's hidden-check cells
    first_index: int = 0  # index of its first exercise cell in the instructor notebook
    rtol: dict = field(default_factory=dict)  # answers that are measurements (timings): name -> relative tolerance


def _points(cells, where: str) -> float:
    found = [c["metadata"]["course"]["points"] for c in cells if "points" in c.get("metadata", {}).get("course", {})]
    value = found[0] if found else 1
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{where}: metadata course.points must be a number >= 0, got {value!r}.")
    return value


def _title(nb, first: int, number: int) -> str:
    for cell in nb.cells[max(0, first - 2) : first + 1][::-1]:
        if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
            return cell.source.strip().splitlines()[0].lstrip("#").strip()
    return f"Exercise {number}"


def parse_exercises(nb, name: str = "notebook") -> list[Exercise]:
    """The exercises of an instructor notebook, in order; a clear error when the tags do not form exercises."""
    exercises, current, groups = [], None, []
    for i, cell in enumerate(nb.cells):
        t = tags(cell)
        if EXERCISE in t:
            if current is None or current[1]:
                current = ([], [], [], i)
                groups.append(current)
            current[0].append(cell)
        elif CHECK in t or HIDDEN in t:
            if current is None or not current[0]:
                raise ValueError(f"{name}: the check cell {cell.get('id', i)!r} has no exercise cell before it.")
            (current[1] if CHECK in t else current[2]).append(cell)
        elif SOLUTION not in t and current is not None and current[1]:
            current = None
    for number, (cells, checks, hidden, first) in enumerate(groups, 1):
        if not checks:
            raise ValueError(
                f"{name}: exercise {number} (cell {cells[0].get('id', first)!r}) has no cell tagged '{CHECK}' after it."
            )
        code = [c for c in cells if c.cell_type == "code"] or cells
        exercises.append(
            Exercise(
                number,
                code[0].get("id") or f"exercise-{number}",
                _title(nb, first, number),
                _points(cells, f"{name}, exercise {number}"),
                [c.get("id") for c in cells if c.get("id")],
                checks,
                hidden,
                first,
                verdict.tolerances(checks, f"{name}, exercise {number}"),
            )
        )
    return exercises


def _clean(cell):
    cell = copy.deepcopy(cell)
    for key in ("papermill", "execution"):
        cell.metadata.pop(key, None)
    return cell


def strip_answer_digests(source: str) -> str:
    """A check cell without the digests of `check_answer(question, answer, digest, ...)` (a digest of "a" to "d" gives
    the answer away): it checks an answer was written; the grader compares it with the instructor's."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    calls = [
        n
        for n in tree.body
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and getattr(n.value.func, "id", None) == "check_answer"
        and len(n.value.args) >= 2
    ]
    lines = source.splitlines(keepends=True)
    for node in reversed(calls):  # statements of their own: replaced line by line, the last first
        question, answer = (ast.get_source_segment(source, a) for a in node.value.args[:2])
        indent = lines[node.lineno - 1][: node.col_offset]
        text = (
            f'{indent}assert {answer} is not ..., str({question}) + ": write your answer in the exercise cell first"\n'
            f'{indent}print(str({question}) + ": answer recorded (the grader compares it with the instructor\'s)")\n'
        )
        lines[node.lineno - 1 : node.end_lineno] = [text]
    return "".join(lines).rstrip("\n") + ("\n" if source.endswith("\n") else "")


def release_notebook(nb, name: str = "notebook"):
    """The student version: no solution or hidden-check cells, exercise and check cells without outputs, the teaching
    cells with theirs (a student reads them before running), and a banner at the top."""
    parse_exercises(nb, name)  # the tags must form exercises
    out = copy.deepcopy(nb)
    out.metadata.pop("papermill", None)
    cells = []
    for cell in nb.cells:
        t = tags(cell)
        if SOLUTION in t or HIDDEN in t:
            continue
        if cell.cell_type == "code" and cell.source.lstrip().startswith("# SOLUTION"):
            raise ValueError(f"{name}: cell {cell.get('id')!r} starts with '# SOLUTION' but is not tagged 'solution'.")
        cell = _clean(cell)
        if cell.cell_type == "code" and (EXERCISE in t or CHECK in t):
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type == "code" and CHECK in t:
            cell.source = strip_answer_digests(cell.source)
        cells.append(cell)
    banner = nbformat.v4.new_markdown_cell(BANNER)
    banner.id = "classroom-student-version"
    out.cells = [banner] + cells
    leaks = leaked_solution_lines(nb, out)
    if leaks:
        raise ValueError(f"{name}: the student version would contain lines of a solution: {leaks[:3]}")
    return out


def _text(cell) -> str:
    parts = [cell.source]
    for out in cell.get("outputs", []):
        parts.append(out.get("text", "") if isinstance(out.get("text", ""), str) else "".join(out["text"]))
        for value in out.get("data", {}).values():
            parts.append(value if isinstance(value, str) else "")
        parts += out.get("traceback", [])
    return "\n".join(parts)


def leaked_solution_lines(instructor_nb, released_nb) -> list[str]:
    """Lines of a solution cell in the released notebook that no other instructor cell has (a shared `def`: no leak)."""
    shared = set()
    for cell in instructor_nb.cells:
        if SOLUTION not in tags(cell):
            shared.update(line.strip() for line in cell.source.splitlines())
    released = {line.strip() for cell in released_nb.cells for line in _text(cell).splitlines()}
    leaks = []
    for cell in instructor_nb.cells:
        if SOLUTION in tags(cell):
            for line in cell.source.splitlines():
                s = line.strip()
                if s and s != "# SOLUTION" and s not in shared and s in released:
                    leaks.append(s)
    return leaks


def _norm(source: str) -> str:
    return re.sub(r"\s+", " ", source).strip()


def _check_cell(source: str, exercise: Exercise, index: int, hidden: bool):
    cell = nbformat.v4.new_code_cell(source)
    cell.id = f"classroom-{'hidden' if hidden else 'check'}-{exercise.number}-{index}"
    cell.metadata["classroom"] = {"exercise": exercise.key, "check": index, "hidden": hidden}
    return cell


SETUP = """\
# classroom: every cell starts in the grading folder, so a cell that changes directory cannot move later ones
def _classroom_setup():
    import os
    home = os.getcwd()

    def restore(*args):
        try:
            os.chdir(home)
        except OSError:
            pass

    get_ipython().events.register("pre_run_cell", restore)


_classroom_setup()
del _classroom_setup
"""


def grading_notebook(
    instructor_nb, student_nb, exercises: list[Exercise] | None = None, hidden: bool = True, capture: dict | None = None
):
    """The student's cells (their copies of the check cells removed) with the instructor's check and hidden-check
    cells inserted after each exercise. Returns (notebook, {exercise key: note}) where a note says how an exercise was
    found when not by its cell ids. The grader passes hidden=False (hidden checks never reach a student's sandbox) and
    `capture`, {exercise key: source of the cell that collects the answers}, put before the checks."""
    exercises = exercises if exercises is not None else parse_exercises(instructor_nb)
    cells = _student_cells(student_nb, exercises)
    positions, notes = _check_positions(instructor_nb, cells, exercises)
    inserts = {}
    for pos, e in positions:
        collect = []
        if capture and e.key in capture:
            collect = [_check_cell(capture[e.key], e, -1, False)]
            collect[0].id, collect[0].metadata["classroom"]["capture"] = f"classroom-answers-{e.number}", True
        inserts.setdefault(pos, []).extend(
            collect
            + [_check_cell(strip_answer_digests(c.source), e, k, False) for k, c in enumerate(e.checks)]
            + [_check_cell(c.source, e, len(e.checks) + k, True) for k, c in enumerate(e.hidden if hidden else [])]
        )
    out_cells = []
    for i in range(len(cells) + 1):
        out_cells.extend(inserts.get(i, []))
        if i < len(cells):
            out_cells.append(_clean(cells[i]))
    return _assemble(instructor_nb, student_nb, out_cells), notes


def _student_cells(student_nb, exercises: list[Exercise]) -> list:
    """The student's cells without their copies of the check cells (found by tag, by id or by source)."""
    check_ids = {c.get("id") for e in exercises for c in e.checks + e.hidden} - {None}
    check_sources = {_norm(c.source) for e in exercises for c in e.checks + e.hidden}
    return [
        c
        for c in student_nb.cells
        if not (
            set(tags(c)) & {CHECK, HIDDEN}
            or c.get("id") in check_ids
            or (c.cell_type == "code" and _norm(c.source) in check_sources)
        )
    ]


def _check_positions(instructor_nb, cells: list, exercises: list[Exercise]):
    """([(index in `cells` to insert before, exercise)], notes): after each exercise and the cells the student added
    to it, before the next teaching cell; exercises found by cell id, else by order when every id was lost."""
    exercise_ids = {i: e for e in exercises for i in e.cell_ids}
    teaching_ids = {
        c.get("id") for c in instructor_nb.cells if not set(tags(c)) & {EXERCISE, SOLUTION, CHECK, HIDDEN}
    } - {None}
    teaching_sources = {_norm(c.source) for c in instructor_nb.cells if c.get("id") in teaching_ids} - {""}

    def boundary(cell):  # a teaching cell (by id, or by source when the ids are lost) or another exercise
        return (
            cell.get("id") in teaching_ids
            or cell.get("id") in exercise_ids
            or EXERCISE in tags(cell)
            or _norm(cell.source) in teaching_sources
        )

    def end_of_segment(anchor):
        j = anchor + 1
        while j < len(cells) and not boundary(cells[j]):
            j += 1
        return j

    by_order = _exercise_groups(cells)
    found_by_id = {e.key: [i for i, c in enumerate(cells) if c.get("id") in e.cell_ids] for e in exercises}
    notes, positions = {}, []
    for e in exercises:
        where = found_by_id[e.key]
        if not where and len(by_order) == len(exercises) and not any(found_by_id.values()):
            where, notes[e.key] = by_order[e.number - 1], "matched by order (the exercise cells have new ids)"
        if where:
            positions.append((end_of_segment(max(where)), e))
            continue
        notes[e.key] = f"exercise cells not found (cell id {e.key!r}): the check ran where the exercise was"
        before = {c.get("id") for c in instructor_nb.cells[: e.first_index]} - {None}
        known = [i for i, c in enumerate(cells) if c.get("id") in before]
        positions.append((end_of_segment(max(known)) if known else (positions[-1][0] if positions else len(cells)), e))
    return positions, notes


def _assemble(instructor_nb, student_nb, cells: list):
    """The grading notebook: the setup cell, then `cells`; the instructor's kernel; unique cell ids."""
    setup = nbformat.v4.new_code_cell(SETUP)
    setup.id, setup.metadata["classroom"] = "classroom-setup", {"setup": True}
    out = copy.deepcopy(student_nb)
    out.metadata.pop("papermill", None)
    out.metadata["kernelspec"] = instructor_nb.metadata.get("kernelspec", out.metadata.get("kernelspec", {}))
    out.cells = [setup] + cells
    out.nbformat, out.nbformat_minor = 4, max(5, out.get("nbformat_minor", 5))
    seen = set()
    for k, cell in enumerate(out.cells):  # ids are required from nbformat 4.5 on; copies may lack or repeat them
        if not cell.get("id") or cell.get("id") in seen:
            cell.id = f"cell-{k}"
        seen.add(cell.id)
    return out


def _exercise_groups(cells) -> list[list[int]]:
    groups, previous = [], False
    for i, cell in enumerate(cells):
        is_exercise = EXERCISE in tags(cell)
        if is_exercise and not previous:
            groups.append([])
        if is_exercise:
            groups[-1].append(i)
        previous = is_exercise
    return groups
