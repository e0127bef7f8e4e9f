"""Small notebooks and student files for the classroom tests: no torch in the notebooks, so a kernel runs them in
a second or two."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat

from classroom import release_notebook

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
    """Three exercises (2 + 1 + 1 points); exercises 1 and 2 have a hidden check; the teaching cells write a file the
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
        _code("ex2-hidden", 'assert triple(-2) == -6, "triple(-2) should be -6"', ["hidden-check"]),
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
    student("hidden-fails", answered(released, ex2="def triple(v):\n    return abs(3 * v)"), 3)  # hidden check fails
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
    from classroom import library

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


# ---------------------------------------------------------------------------------------------------------------------
# A hostile class: every cheat the grader must not fall for (issue 27). Each student's expected points are what their
# honest work earns; `MARKER` is in the command line of every process a student leaves behind.

QUIZ = "91_quiz"
MARKER = "4242.5"  # sleep 4242.5: the detached processes a student starts, found by this argument


def quiz_notebook():
    """One conceptual question checked by `check_answer` (a digest in the check cell), 1 point."""
    from course.exercises import answer_digest

    digest = answer_digest("91-q1", "c")
    cells = [
        _code("imports", "from course.exercises import check_answer, unanswered"),
        _md("q1-md", "### Question 1 — pick one"),
        _code("q1", 'q1 = ...  # your answer: "a", "b", "c" or "d"', ["exercise"]),
        _code("q1-solution", '# SOLUTION\nif unanswered(q1):\n    q1 = "c"', ["solution"]),
        _code("q1-check", f'check_answer("91-q1", q1, "{digest}")', ["exercise-check"]),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _with_first_cell(nb, source, id_="my-first-cell"):
    nb = copy.deepcopy(nb)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = id_
    nb.cells.insert(1, cell)
    return nb


STEAL = """\
import glob, json, os
def steal(exercise):
    # every place the instructor's notebook could be: the job file, the folders above, the course
    places = []
    for job in ("../job.json", "../../job.json", "job.json"):
        try:
            places.append(json.load(open(job))["source"])
        except Exception:
            pass
    places += [SOURCE] + glob.glob("/**/source/90_fixture.ipynb", recursive=False)
    for place in places:
        try:
            nb = json.load(open(place))
        except Exception:
            continue
        for cell in nb["cells"]:
            if cell.get("id") == exercise + "-solution":
                exec("".join(cell["source"]), globals())
                return
"""


def hostile_class(root: Path) -> dict[str, float]:
    """SUBMISSIONS under root/submissions (fixture notebook, quiz notebook and library) for root/source; the reports
    are meant for root/reports. Returns each student's honest points (what the cheat must score)."""
    from classroom import library

    source, subs, reports = root / "source", root / "submissions", root / "reports"
    instructor = instructor_notebook()
    write(instructor, source)
    write(quiz_notebook(), source, QUIZ + ".ipynb")
    released = release_notebook(instructor, NAME)
    quiz = release_notebook(quiz_notebook(), QUIZ)
    expected = {}

    def student(name, nb, points, quiz_nb=None, quiz_points=0):
        write(nb, subs / name)
        if quiz_nb is not None:
            write(quiz_nb, subs / name, QUIZ + ".ipynb")
        expected[name] = points + quiz_points

    # hiding failures: exceptions swallowed, check_answer replaced
    student(
        "custom-exc",
        _with_first_cell(released, "get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)"),
        0,
    )
    fake = "def check_answer(*args, **kwargs):\n    print('correct')\n"
    student("fake-check", answered(released, ex1="double = 5"), 2, answer(quiz, "q1", fake + 'q1 = "a"'), 0)
    student("honest-quiz", released, 0, answer(quiz, "q1", 'q1 = "C"'), 1)
    # values that claim to be equal to anything
    liar = "class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
    student("liar", answered(released, ex1=liar + "double = Liar(5)"), 2)
    # reading the instructor's notebook and running its solutions
    steal = STEAL.replace("SOURCE", repr(str(source / f"{NAME}.ipynb")))
    stealer = _with_first_cell(released, steal)
    for ex in ("ex1", "ex2", "ex3"):
        stealer = answer(stealer, ex, f"steal({ex!r})")
    student("stealer", stealer, 0)
    # other people's files: the next student's submission, the instructor's check
    vandal = f"""\
import json
victim = {str(subs / "victim" / f"{NAME}.ipynb")!r}
try:
    open(victim, "w").write(open({str(subs / "blank-copy" / f"{NAME}.ipynb")!r}).read())
except Exception as exc:
    print("victim:", exc)
src = {str(source / f"{NAME}.ipynb")!r}
try:
    text = open(src).read().replace("double == 4", "double in (4, 5)")
    open(src, "w").write(text)
except Exception as exc:
    print("source:", exc)
"""
    student("vandal", _with_first_cell(released, vandal), 0)
    student("victim", answered(released), 4)
    student("blank-copy", released, 0)
    student("wrong-five", answered(released, ex1="double = 5"), 2)
    # after the grader: a detached process that rewrites the reports, and 50 sleepers
    detached = f"""\
import subprocess, sys
code = '''
import os, time
path = {str(reports / "grades.csv")!r}
for _ in range(1500):
    if os.path.exists(path):
        time.sleep(1)
        rows = open(path).read().splitlines()
        rows = [r.replace(",0,2,failed", ",2,2,passed").replace(",0,1,failed", ",1,1,passed")
                if r.startswith("detached,") else r for r in rows]
        open(path, "w").write("\\\\n".join(rows) + "\\\\n")
        break
    time.sleep(0.2)
'''
subprocess.Popen([sys.executable, "-c", code, "{MARKER}"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(50):
    subprocess.Popen(["sleep", "{MARKER}"], start_new_session=True)
"""
    student("detached", _with_first_cell(released, detached), 0)
    # resources: memory, processes, network, output, signals
    student("memory-hog", _with_first_cell(answered(released), "hog = bytearray(24 * 2**30)"), 4)
    fork = (
        "import os\nfor _ in range(400):\n    try:\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n    except OSError:\n        break\n"
    )
    student("fork-bomb", _with_first_cell(answered(released), fork), 4)
    net = (
        "import socket\ntry:\n    socket.create_connection(('pypi.org', 443), timeout=5)\n    double = 4\n"
        "except OSError:\n    pass\n"
    )
    student("network", answered(released, ex1=net + "double = double if double is not ... else 5"), 2)
    student(
        "kill-all",
        _with_first_cell(
            answered(released, ex1="double = 5"),
            "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\n",
        ),
        0,
    )
    # names: two students whose folder names make the same safe name; a formula; a dot folder; links
    student("ann lee", answered(released), 4)
    student("ann_lee", released, 0)
    formula = 'def triple(v):\n    raise type("=HYPERLINK(1)", (Exception,), {})("click")'
    student("formula", answered(released, ex2=formula), 3)  # the check's error message starts with =HYPERLINK
    student("=1+2", released, 0)
    write(released, subs / ".hidden-student")
    (subs / "linker").mkdir(parents=True)
    (subs / "linker" / f"{NAME}.ipynb").symlink_to(source / f"{NAME}.ipynb")
    expected["linker"] = 0
    write(answered(released), subs / "etc-link")
    (subs / "etc-link" / "etc").symlink_to("/etc")
    expected["etc-link"] = 0
    # the library: patched comparisons, a rewritten pytest report
    starter = library.starter_source(library.SOURCE.read_text())
    head = "from torch import nn\n"
    patched = starter.replace(
        head, head + "torch.equal = lambda *a, **k: True\ntorch.allclose = lambda *a, **k: True\n"
    ).replace('raise NotImplementedError("patchify: write your code here")', "return images.new_zeros(1)")
    junit = "".join(
        f'<testcase classname="test_vit_from_scratch" name="test_{key}_x" time="0"/>' for key, _, _ in library.EXERCISES
    )
    rewrite = (
        "import atexit\n\ndef _rewrite():\n    open('junit.xml', 'w').write("
        + repr(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{junit}</testsuite></testsuites>')
        + ")\n\natexit.register(_rewrite)\n"
    )
    atexit_ = starter.replace(head, head + rewrite)
    for name, text in (("lib-patched", patched), ("lib-atexit", atexit_)):
        (subs / name).mkdir(parents=True)
        (subs / name / library.FILENAME).write_text(text)
        expected[name] = 0
    for name, (files, points) in library_rule_attacks().items():
        for relative, text in files.items():
            (subs / name / relative).parent.mkdir(parents=True, exist_ok=True)
            (subs / name / relative).write_text(text)
        expected[name] = points
    return expected


def library_rule_attacks() -> dict[str, tuple[dict[str, str], float]]:
    """Library submissions whose rules were read from another file than the one that ran (issue 61): {student:
    ({relative path: text}, points the rules give)}. Import forms and late methods: test_classroom_library.py."""
    from classroom import library

    solution, starter = library.SOURCE.read_text(), library.starter_source(library.SOURCE.read_text())
    rewrite = "\nimport vitlib\nimport pathlib\n\n_me = pathlib.Path(__file__)\n"
    rewrite += "_me.write_text(_me.read_text().replace('import vitlib' + chr(10), ''))\n"
    return {
        "lib-rewrites-itself": ({library.FILENAME: solution + rewrite}, 0),
        "lib-package": ({library.FILENAME: starter, "vit_from_scratch/__init__.py": solution + "import vitlib\n"}, 0),
    }
