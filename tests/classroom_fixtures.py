"""Small notebooks and student files for the classroom tests: no torch in the notebooks, so a kernel runs them in
a second or two."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from vitlib.classroom import release_notebook

NAME = "90_fixture"


def _code(id_, source, tags=(), **meta):
    cell = nbformat.v4.new_code_cell(source)
    cell.id, cell.metadata["tags"] = id_, list(tags)
    cell.metadata.update(meta)
    return cell


def _md(id_, source, tags=()):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.id, cell.metadata["tags"] = id_, list(tags)
    return cell


def instructor_notebook():
    """Three exercises (2 + 1 + 1 points); exercise 1 has a hidden check; the teaching cells write a file the
    third check reads (relative to the working folder)."""
    cells = [
        _code("setup", "x = 2\nprint('x =', x)"),
        _md("ex1-md", "### Exercise 1 — double x"),
        _code("ex1", "double = ...  # TODO: 2 x", ["exercise"], course={"points": 2}),
        _code("ex1-solution", "# SOLUTION\ndouble = 2 * x", ["solution"], jupyter={"source_hidden": True}),
        _code(
            "ex1-check",
            'assert double is not ..., "fill in the exercise cell first"\n'
            'assert double == 4, f"double should be 4, got {double}"\nprint("exercise 1: correct")',
            ["exercise-check"],
        ),
        _code("ex1-hidden", 'assert isinstance(double, int), "double must be an int"', ["hidden-check"]),
        _code("teach2", "y = x + 1\nwith open('notes.txt', 'w') as f:\n    f.write('hello')"),
        _md("ex2-md", "### Exercise 2 — triple"),
        _code("ex2", "def triple(v):\n    ...  # TODO", ["exercise"]),
        _code(
            "ex2-solution",
            "# SOLUTION\ndef triple(v):\n    return 3 * v",
            ["solution"],
            jupyter={"source_hidden": True},
        ),
        _code(
            "ex2-check",
            'assert triple(1) is not None, "triple returns nothing yet"\n'
            'assert triple(y) == 9, f"triple(3) should be 9, got {triple(y)}"',
            ["exercise-check"],
        ),
        _md("ex3-md", "### Exercise 3 — square"),
        _code("ex3", "square = ...  # TODO: y squared", ["exercise"]),
        _code("ex3-solution", "# SOLUTION\nsquare = y ** 2", ["solution"], jupyter={"source_hidden": True}),
        _code(
            "ex3-check",
            'assert square is not ..., "fill in the exercise cell first"\n'
            'assert open("notes.txt").read() == "hello", "the notes are not where the course wrote them"\n'
            'assert square == 9, "y squared is 9"',
            ["exercise-check"],
        ),
        _md("end", "The end."),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def answer(nb, exercise_id, source):
    """A copy of `nb` with the exercise cell `exercise_id` holding `source`."""
    nb = copy.deepcopy(nb)
    next(c for c in nb.cells if c.get("id") == exercise_id).source = source
    return nb


RIGHT = {"ex1": "double = 2 * x", "ex2": "def triple(v):\n    return 3 * v", "ex3": "square = y * y"}


def answered(released, **overrides):
    nb = released
    for ex, src in {**RIGHT, **overrides}.items():
        nb = answer(nb, ex, src)
    return nb


def write(nb, folder: Path, name: str = NAME + ".ipynb") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def fixture_class(root: Path) -> dict[str, float]:
    """SUBMISSIONS under root/submissions for the fixture notebook; returns each student's expected points."""
    source = root / "source"
    instructor = instructor_notebook()
    write(instructor, source)
    released = release_notebook(instructor, NAME)
    subs = root / "submissions"
    expected = {}

    def student(name, nb, points):
        write(nb, subs / name)
        expected[name] = points

    student("full", instructor, 4)
    student("blank", released, 0)
    student("some-right", answered(released, ex1="double = 5"), 2)  # 2 and 3 right
    student("hidden-fails", answered(released, ex1="double = 4.0"), 2)  # visible check passes, hidden fails
    tampered = answered(released, ex1="double = 5")
    for cell in tampered.cells:
        if cell.get("id") == "ex1-check":  # edited to pass, untagged, renamed
            cell.source, cell.metadata["tags"], cell.id = "assert True", [], "my-check"
    tampered.cells = [c for c in tampered.cells if c.get("id") != "ex2-check"]  # deleted
    student("tampered", tampered, 2)
    student("endless", answered(released, ex2="def triple(v):\n    while True:\n        pass"), 3)
    student("endless-cell", answered(released, ex1="while True:\n    pass"), 2)
    student("raises", answered(released, ex2='raise ValueError("not today")'), 3)
    student(
        "wanders",
        answered(
            released,
            ex1="import os\nos.chdir('/')\nopen('/dev/null', 'w')\ndouble = 2 * x",
            ex3="open('written.txt', 'w').write('x')\nopen('../escaped.txt', 'w').write('x')\nsquare = y * y",
        ),
        4,
    )
    student("kernel-dies", answered(released, ex2="import os\nos._exit(1)"), 2)
    (subs / "broken-json").mkdir(parents=True)
    (subs / "broken-json" / f"{NAME}.ipynb").write_text('{"cells": [')
    expected["broken-json"] = 0
    (subs / "missing").mkdir(parents=True)
    (subs / "missing" / "notes.md").write_text("I forgot to upload it")
    expected["missing"] = 0
    return expected


def library_variants() -> dict[str, tuple[str, float]]:
    """Library files: (source, expected points). `overfit` fits only the visible tests' shapes (P = 4, 2 heads)."""
    from vitlib.classroom import library

    solution = library.SOURCE.read_text()
    overfit = solution.replace("    p = patch_size\n", "    p = 4\n").replace(
        "        h = self.heads\n", "        h = 2\n"
    )
    assert overfit != solution and overfit.count("= 4\n") >= 1
    loop = solution.replace("    p = patch_size\n", "    p = patch_size\n    while p == 7:\n        pass\n")
    return {
        "overfit": (overfit, 0),
        "lib-syntax": (solution.replace("def patchify(", "def patchify(("), 0),
        "lib-loop": (loop, 2),
    }
