"""Exercises that keep a learner's answer, and conceptual questions whose answers are checked without showing them.

A solution cell runs only while its exercise is still a TODO, so running the whole notebook never overwrites an answer:

    # SOLUTION
    if unanswered(my_unpatchify):
        def my_unpatchify(patches, patch_size, grid, channels): ...

A conceptual question's check compares a digest, so the check cell does not give the answer away:

    check_answer("01-q1", q1, "5d41402abc4b")   # digest = answer_digest("01-q1", <the right answer>)
"""

from __future__ import annotations

import dis
import hashlib
import inspect

_TRIVIAL = {"RESUME", "NOP", "CACHE", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST"}


def _returns_nothing(code) -> bool:
    """The function's body does nothing but return None (its body is `...`, `pass` or a docstring)."""
    ops = list(dis.get_instructions(code))
    return all(op.opname in _TRIVIAL for op in ops) and all(
        op.argval is None for op in ops if op.opname in ("LOAD_CONST", "RETURN_CONST")
    )


def is_todo(answer) -> bool:
    """True for an exercise cell's placeholder: the value `...`, a function whose body is only `...` (it returns
    nothing), or a class with such a method."""
    if answer is Ellipsis:
        return True
    if inspect.isclass(answer):
        return any(is_todo(f) for f in vars(answer).values() if inspect.isfunction(f))
    code = getattr(answer, "__code__", None)
    return code is not None and _returns_nothing(code)


def unanswered(*answers) -> bool:
    """True while every one of `answers` is still a TODO: the solution may fill them in without overwriting work."""
    if not answers:
        raise TypeError("unanswered() needs the names the exercise asks for, e.g. unanswered(n_tokens, patch_dim)")
    return all(is_todo(a) for a in answers)


def _normalise(answer) -> str:
    if isinstance(answer, str):
        return " ".join(answer.lower().split())
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return repr(answer).lower()
    return repr(int(answer)) if float(answer).is_integer() else repr(round(float(answer), 6))


def answer_digest(question: str, answer) -> str:
    """The 12-hex-digit digest a check cell stores for `answer` to `question` (case and spacing ignored)."""
    return hashlib.sha256(f"{question}:{_normalise(answer)}".encode()).hexdigest()[:12]


def check_answer(question: str, answer, digest: str, hint: str = "") -> None:
    """Raise an AssertionError (with `hint`) unless `answer` is the right one; print that it is."""
    if answer is Ellipsis:
        raise AssertionError(f"{question}: write your answer in the exercise cell first (it is still `...`)")
    if answer_digest(question, answer) != digest:
        raise AssertionError(f"{question}: {answer!r} is not the answer." + (f" Hint: {hint}" if hint else ""))
    print(f"{question}: correct")
