"""`make check-assignments`: grade a synthetic class on every assignment and compare with what it must score.

The class: `instructor` submits the instructor's notebooks and library solution as they are (full marks), `released`
submits the student versions untouched (zero), `partial` submits the student versions with the odd-numbered
exercises answered by the instructor's solution cells (exactly their points; the library: patchify and the patch
embedding).
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import nbformat

from . import library
from .notebooks import SOLUTION, parse_exercises, tags
from .release import release_all

PARTIAL_LIBRARY = {"patchify", "PatchEmbedding.forward"}
PARTIAL_LIBRARY_EXERCISES = {"patchify", "patch_embedding"}


def answered_notebook(instructor_nb, released_nb, answered: set[int]):
    """The released notebook with the instructor's solution cells of the exercises numbered in `answered` pasted
    after their exercise cells, as a student's own cells (no tags, new ids)."""
    nb = copy.deepcopy(released_nb)
    for e in parse_exercises(instructor_nb):
        if e.number not in answered:
            continue
        start = e.first_index
        solutions = []
        for cell in instructor_nb.cells[start:]:
            if SOLUTION in tags(cell):
                solutions.append(cell)
            elif solutions:
                break
        at = max(i for i, c in enumerate(nb.cells) if c.get("id") in e.cell_ids) + 1
        for k, sol in enumerate(solutions):
            cell = nbformat.v4.new_code_cell(sol.source.replace("# SOLUTION", "# my answer", 1))
            cell.id = f"answer-{e.number}-{k}"
            nb.cells.insert(at + k, cell)
    return nb


def partial_library_source() -> str:
    return library.starter_source(library.SOURCE.read_text(), keep=PARTIAL_LIBRARY)


def build_class(source: Path, out: Path, assignments: list[str]) -> dict[str, dict[str, float]]:
    """Write out/release and out/submissions/{instructor,released,partial}; return the expected points
    {student: {assignment: points}}."""
    release = out / "release"
    release_all(source, release, assignments)
    subs = out / "submissions"
    expected = {"instructor": {}, "released": {}, "partial": {}}
    for student in expected:
        (subs / student).mkdir(parents=True, exist_ok=True)
    for name in assignments:
        if name == library.ASSIGNMENT:
            shutil.copy(library.SOURCE, subs / "instructor" / library.FILENAME)
            shutil.copy(release / library.FILENAME, subs / "released" / library.FILENAME)
            (subs / "partial" / library.FILENAME).write_text(partial_library_source())
            pts = {key: p for key, _, p in library.EXERCISES}
            expected["instructor"][name] = sum(pts.values())
            expected["partial"][name] = sum(pts[k] for k in PARTIAL_LIBRARY_EXERCISES)
        else:
            path = source / f"{name}.ipynb"
            instructor = nbformat.read(path, as_version=4)
            released = nbformat.read(release / path.name, as_version=4)
            exercises = parse_exercises(instructor, path.name)
            odd = {e.number for e in exercises if e.number % 2}
            shutil.copy(path, subs / "instructor" / path.name)
            shutil.copy(release / path.name, subs / "released" / path.name)
            nbformat.write(answered_notebook(instructor, released, odd), subs / "partial" / path.name)
            expected["instructor"][name] = sum(e.points for e in exercises)
            expected["partial"][name] = sum(e.points for e in exercises if e.number in odd)
        expected["released"][name] = 0
    return expected


def compare(rows: list[dict], expected: dict) -> list[str]:
    """What differs between the grades and the expected points, one line per (student, assignment)."""
    got = {}
    for r in rows:
        got.setdefault(r["student"], {}).setdefault(r["assignment"], 0)
        got[r["student"]][r["assignment"]] += r["points"]
    problems = []
    for student, per in expected.items():
        for assignment, points in per.items():
            have = got.get(student, {}).get(assignment)
            if have != points:
                bad = [
                    f"{r['exercise']}: {r['status']} {r['message'][:150]}"
                    for r in rows
                    if r["student"] == student
                    and r["assignment"] == assignment
                    and (r["points"] == 0) == (student != "released")
                ]
                problems.append(f"{student} / {assignment}: {have} points, expected {points}; " + " | ".join(bad[:4]))
    return problems
