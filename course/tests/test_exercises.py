"""course.exercises: a solution cell fills in only what is still a TODO; answers are checked by digest."""

import pytest

from course.exercises import answer_digest, check_answer, is_todo, unanswered


def stub(x, y): ...  # TODO


def documented_stub(x):
    """Return x doubled."""
    ...


def answer(x):
    return 2 * x


def returns_zero():
    return 0


class StubModule:
    def forward(self, x): ...  # TODO


class AnsweredModule:
    def forward(self, x):
        return x


@pytest.mark.parametrize("value", [..., stub, documented_stub, StubModule, lambda x: None])
def test_placeholders_are_todo(value):
    assert is_todo(value)


@pytest.mark.parametrize("value", [None, 0, "b", [...], answer, returns_zero, AnsweredModule, print])
def test_answers_are_not_todo(value):
    assert not is_todo(value)


def test_unanswered_needs_every_answer_to_be_a_todo():
    assert unanswered(..., stub)
    assert not unanswered(..., 3)  # half answered: the solution must not overwrite the half that is there
    with pytest.raises(TypeError, match="needs the names"):
        unanswered()


def test_a_solution_cell_keeps_the_learners_answer():
    cell = "if unanswered(f):\n    def f(x):\n        return 'solution'\n"
    learner = {"unanswered": unanswered}
    exec("def f(x):\n    return 'mine'\n", learner)
    exec(cell, learner)
    assert learner["f"](0) == "mine"
    untouched = {"unanswered": unanswered}
    exec("def f(x):\n    ...  # TODO\n", untouched)
    exec(cell, untouched)
    assert untouched["f"](0) == "solution"


def test_digest_ignores_case_spacing_and_int_float():
    assert answer_digest("q1", " B ") == answer_digest("q1", "b")
    assert answer_digest("q1", 3) == answer_digest("q1", 3.0)
    assert answer_digest("q1", "b") != answer_digest("q2", "b")  # the question is part of the digest
    assert answer_digest("q1", "b") != answer_digest("q1", "c")


def test_check_answer(capsys):
    digest = answer_digest("01-q1", "c")
    check_answer("01-q1", "C", digest)
    assert "01-q1: correct" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="'a' is not the answer. Hint: count the tokens"):
        check_answer("01-q1", "a", digest, hint="count the tokens")
    with pytest.raises(AssertionError, match="still `...`"):
        check_answer("01-q1", ..., digest)
