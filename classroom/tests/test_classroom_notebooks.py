"""Where the grader puts the instructor's checks in a student's notebook, whatever the student did to it."""

import copy

import nbformat
from classroom_fixtures import NAME, answered, instructor_notebook

from classroom import grading_notebook, release_notebook


def layout(nb):
    """The grading notebook as a list of cell ids; inserted checks as 'check:<exercise>' / 'hidden:<exercise>'."""
    out = []
    for cell in nb.cells[1:]:  # cell 0 sets up the grading
        meta = cell.metadata.get("classroom")
        out.append(f"{'hidden' if meta['hidden'] else 'check'}:{meta['exercise']}" if meta else cell.get("id"))
    return out


def test_checks_follow_each_exercise_and_its_solution_in_the_instructor_notebook():
    nb = instructor_notebook()
    graded, notes = grading_notebook(nb, nb)
    assert layout(graded) == [
        "setup",
        "ex1-md",
        "ex1",
        "ex1-solution",
        "check:ex1",
        "hidden:ex1",
        "teach2",
        "ex2-md",
        "ex2",
        "ex2-solution",
        "check:ex2",
        "hidden:ex2",
        "ex3-md",
        "ex3",
        "ex3-solution",
        "check:ex3",
        "end",
    ]
    assert notes == {}
    assert graded.cells[0].metadata["classroom"] == {"setup": True}
    nbformat.validate(graded)


def test_the_students_own_cells_stay_with_their_exercise_and_their_checks_are_replaced():
    student = answered(release_notebook(instructor_notebook(), NAME))
    helper = nbformat.v4.new_code_cell("helper = 1")
    helper.id = "my-helper"
    student.cells.insert(next(i for i, c in enumerate(student.cells) if c.id == "ex2") + 1, helper)
    for cell in student.cells:
        if cell.id == "ex1-check":
            cell.source, cell.metadata["tags"] = "assert True  # edited", []
        if cell.id == "ex3-check":  # retyped in a new cell: the same source, a new id, no tag
            cell.id, cell.metadata["tags"] = "retyped", []
    graded, _ = grading_notebook(instructor_notebook(), student)
    assert layout(graded) == [
        "classroom-student-version",
        "setup",
        "ex1-md",
        "ex1",
        "check:ex1",
        "hidden:ex1",
        "teach2",
        "ex2-md",
        "ex2",
        "my-helper",
        "check:ex2",
        "hidden:ex2",
        "ex3-md",
        "ex3",
        "check:ex3",
        "end",
    ]
    sources = [c.source for c in graded.cells]
    assert "assert True  # edited" not in sources
    assert any("assert double == 4" in s for s in sources)


def test_exercises_are_matched_by_order_when_the_ids_are_lost():
    student = answered(release_notebook(instructor_notebook(), NAME))
    old_ids = [c.id for c in student.cells]
    for k, cell in enumerate(student.cells):  # pasted into a new notebook: every id is new, the tags stay
        cell.id = f"new-{k}"
    graded, notes = grading_notebook(instructor_notebook(), student)
    order = [old_ids[int(x[4:])] if x.startswith("new-") else x for x in layout(graded)]
    assert order == [
        "classroom-student-version",
        "setup",
        "ex1-md",
        "ex1",
        "check:ex1",
        "hidden:ex1",
        "teach2",
        "ex2-md",
        "ex2",
        "check:ex2",
        "hidden:ex2",
        "ex3-md",
        "ex3",
        "check:ex3",
        "end",
    ]
    assert all("matched by order" in notes[key] for key in ("ex1", "ex2", "ex3"))


def test_a_deleted_exercise_is_checked_where_it_was_and_said_so():
    student = answered(release_notebook(instructor_notebook(), NAME))
    student.cells = [c for c in student.cells if c.id != "ex2"]
    graded, notes = grading_notebook(instructor_notebook(), copy.deepcopy(student))
    order = layout(graded)
    assert (
        order.index("check:ex2") == order.index("ex2-md") + 1
        and order.index("hidden:ex2") == order.index("check:ex2") + 1
    )
    assert "not found" in notes["ex2"] and "ex1" not in notes


def test_the_grader_sends_no_hidden_check_to_the_sandbox_and_collects_answers_before_the_checks():
    student = answered(release_notebook(instructor_notebook(), NAME))
    capture = {"ex1": "collect(1)", "ex2": "collect(2)", "ex3": "collect(3)"}
    graded, _ = grading_notebook(instructor_notebook(), student, hidden=False, capture=capture)
    order = layout(graded)
    assert not [x for x in order if x.startswith("hidden:")]
    sources = [c.source for c in graded.cells]
    assert "isinstance(double, int)" not in "\n".join(sources) and "triple(-2)" not in "\n".join(sources)
    for n in (1, 2, 3):
        at = sources.index(f"collect({n})")
        assert order[at - 1] == order[at] == f"check:ex{n}"  # layout() leaves out cell 0
        assert graded.cells[at].metadata["classroom"]["capture"] is True


def test_thousands_of_raw_cells_are_assembled_in_linear_time():
    """issue 61: 13,300 raw cells took 15.8 s to number in the grader's own process (a list searched per cell)."""
    import time

    instructor = instructor_notebook()
    student = answered(release_notebook(instructor))
    for _ in range(13_300):
        cell = nbformat.v4.new_raw_cell("x")
        cell.id = "same"  # every copy repeats one id: each must get one of its own
        student.cells.append(cell)
    started = time.perf_counter()
    graded, _ = grading_notebook(instructor, student)
    assert time.perf_counter() - started < 10.0  # 2.3 s on a loaded 2-core machine
    ids = [c.get("id") for c in graded.cells]
    assert len(ids) == len(set(ids)) and len(ids) > 13_300
