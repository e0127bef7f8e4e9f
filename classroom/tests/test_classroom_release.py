"""The student versions: made from the instructor's sources, with no line of a solution and no hidden check."""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from classroom_fixtures import NAME, instructor_notebook

from classroom import leaked_solution_lines, library, parse_exercises, release_all, release_notebook

COURSE = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOKS = sorted(COURSE.glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release_all(COURSE, out)
    return out


def tags(cell):
    return cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_released_notebook_has_no_solution_and_keeps_the_teaching_outputs(path, released):
    instructor = nbformat.read(path, as_version=4)
    student = nbformat.read(released / path.name, as_version=4)
    nbformat.validate(student)
    assert not [c for c in student.cells if {"solution", "hidden-check"} & set(tags(c))]
    assert leaked_solution_lines(instructor, student) == []
    text = "\n".join(c.source for c in student.cells)
    for cell in instructor.cells:
        if "solution" in tags(cell):
            own = [
                line
                for line in cell.source.splitlines()[1:]
                if line.strip()
                and all(line.strip() not in o.source for o in instructor.cells if "solution" not in tags(o))
            ]
            assert own and not [line for line in own if line.strip() in text], f"{path.name}: a solution line leaked"
    by_id = {c.id: c for c in instructor.cells}
    for cell in student.cells[1:]:
        if cell.cell_type != "code":
            continue
        if {"exercise", "exercise-check"} & set(tags(cell)):
            assert cell.outputs == [] and cell.execution_count is None
        else:
            assert cell.outputs == by_id[cell.id].outputs, f"{path.name}: teaching cell {cell.id} lost its outputs"
    assert [e.cell_ids for e in parse_exercises(student, path.name)] == [
        e.cell_ids for e in parse_exercises(instructor, path.name)
    ]


def test_the_library_starter_has_no_solution_and_ships_the_visible_tests(released):
    starter = (released / library.FILENAME).read_text()
    ast.parse(starter)
    lines = {line.strip() for line in starter.splitlines()}
    assert not [s for s in library.solution_lines(library.SOURCE.read_text()) if s in lines]
    assert starter.count('raise NotImplementedError("') == 5
    assert 'raise NotImplementedError("MultiHeadSelfAttention.forward: write your code here")' in starter
    assert (released / "test_vit_from_scratch.py").read_text() == library.VISIBLE_TESTS.read_text()
    assert not (released / library.HIDDEN_TESTS.name).exists()


def test_hidden_checks_and_points_come_from_the_instructor_notebook():
    nb = instructor_notebook()
    exercises = parse_exercises(nb, NAME)
    assert [(e.key, e.points, len(e.checks), len(e.hidden)) for e in exercises] == [
        ("ex1", 2, 1, 1),
        ("ex2", 1, 1, 1),
        ("ex3", 1, 1, 0),
    ]
    assert exercises[0].title == "Exercise 1 — double x"
    student = release_notebook(nb, NAME)
    assert "isinstance(double, int)" not in "\n".join(c.source for c in student.cells)
    nb.cells[2].metadata["course"] = {"points": "two"}
    with pytest.raises(ValueError, match="course.points must be a number"):
        parse_exercises(nb, NAME)


def test_a_check_without_an_exercise_is_a_clear_error():
    nb = instructor_notebook()
    nb.cells = [c for c in nb.cells if c.get("id") not in ("ex1", "ex1-md", "ex1-solution")]
    nb.cells[0].metadata["tags"] = []
    with pytest.raises(ValueError, match="has no exercise cell before it"):
        parse_exercises(nb, NAME)


def test_the_release_holds_no_digest_of_a_quiz_answer(released):
    """A digest of "a" to "d" gives the answer away: the released checks only say that an answer was written."""
    digest = re.compile(r"[\"']([0-9a-f]{12})[\"']")
    for path in NOTEBOOKS:
        instructor = nbformat.read(path, as_version=4)
        digests = {d for c in instructor.cells if "exercise-check" in tags(c) for d in digest.findall(c.source)}
        text = "\n".join(c.source for c in nbformat.read(released / path.name, as_version=4).cells)
        assert not [d for d in digests if d in text], path.name
        if digests:
            assert "answer recorded (the grader compares it" in text


def test_the_library_solution_and_hidden_tests_are_not_package_data():
    import vitlib

    package = Path(vitlib.__file__).resolve().parent
    assert not list(package.rglob("vit_from_scratch*.py")) and not list(package.rglob("test_*hidden*.py"))
    assert "package-data" not in (COURSE.parent / "pyproject.toml").read_text()
