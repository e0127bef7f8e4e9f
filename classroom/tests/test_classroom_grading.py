"""Grading a class of small fixture submissions with every fault: each exercise gets the points it deserves and a
clear message, and the batch finishes (exit code 0). The grader runs student code in a bubblewrap sandbox: without
`bwrap` these tests are skipped (CI installs it)."""

import csv
import shutil
import subprocess
import sys

import pytest
from classroom_fixtures import NAME, fixture_class, library_variants

from classroom import Options, grade_class
from classroom.__main__ import main
from classroom.reports import COLUMNS
from classroom.sandbox import INSTALL

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=INSTALL)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    expected = fixture_class(root)
    for name, (source, points) in library_variants().items():
        (root / "submissions" / name).mkdir()
        (root / "submissions" / name / "vit_from_scratch.py").write_text(source)
        expected[name] = points
    reports = root / "reports"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "classroom",
            "grade",
            str(root / "submissions"),
            "--out",
            str(reports),
            "--source",
            str(root / "source"),
            "--cell-timeout",
            "5",
            "--timeout",
            "120",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with open(reports / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    return root, expected, rows, run


def rows_of(rows, student, assignment=NAME):
    return {r["exercise"]: r for r in rows if r["student"] == student and r["assignment"] == assignment}


def test_every_student_gets_exactly_the_points_of_what_is_right(graded):
    _, expected, rows, run = graded
    got = {}
    for r in rows:
        got[r["student"]] = got.get(r["student"], 0) + float(r["points"])
    assert got == expected
    assert list(rows[0]) == COLUMNS
    assert {r["status"] for r in rows} <= {"passed", "failed", "error", "timeout"}
    assert "grading" in run.stderr and "student/s" in run.stderr  # the tqdm bar over students


def test_the_instructors_checks_grade_a_tampered_notebook(graded):
    r = rows_of(graded[2], "tampered")
    assert (r["1"]["status"], r["1"]["message"]) == ("failed", "double should be 4, got 5")
    assert r["2"]["status"] == "passed"  # its check cell was deleted, the instructor's ran


def test_a_hidden_check_counts(graded):
    r = rows_of(graded[2], "hidden-fails")
    assert r["1"]["status"] == r["3"]["status"] == "passed"
    assert r["2"]["status"] == "failed"
    assert r["2"]["message"].startswith(
        "a hidden check: triple(...) on input 3 of 3 of the checks: the output is wrong"
    )


def test_an_endless_loop_times_out_and_the_next_exercise_is_graded(graded):
    r = rows_of(graded[2], "endless")
    assert r["2"]["status"] == "timeout" and "5 s per cell" in r["2"]["message"]
    assert r["3"]["status"] == "passed"
    r = rows_of(graded[2], "endless-cell")
    assert r["1"]["status"] == "timeout" and "your cell starting `while True:` ran past" in r["1"]["message"]
    assert r["2"]["status"] == r["3"]["status"] == "passed"


def test_an_exception_is_an_error_with_its_message(graded):
    r = rows_of(graded[2], "raises")
    assert r["2"]["status"] == "error"
    assert "NameError" in r["2"]["message"] and "raised ValueError: not today" in r["2"]["message"]
    assert r["3"]["status"] == "passed"


def test_broken_json_missing_files_and_a_dying_kernel(graded):
    rows = graded[2]
    for r in rows_of(rows, "broken-json").values():
        assert r["status"] == "error" and "is not a readable notebook" in r["message"]
    for r in rows_of(rows, "missing").values():
        assert r["status"] == "error" and r["message"] == f"not submitted: no {NAME}.ipynb in missing/"
    r = rows_of(rows, "kernel-dies")
    assert r["1"]["status"] == "passed"
    assert r["2"]["status"] == "error" and "stopped before this check" in r["2"]["message"]


def test_changing_directory_and_writing_files_touch_nothing_outside_the_copy(graded):
    root, _, rows, _ = graded
    assert {r["status"] for r in rows_of(rows, "wanders").values()} == {"passed"}
    assert sorted(p.name for p in (root / "submissions" / "wanders").iterdir()) == [f"{NAME}.ipynb"]
    assert not list(root.rglob("escaped.txt")) and not list(root.rglob("written.txt"))


def test_a_library_answer_that_fits_only_the_visible_tests_fails(graded):
    r = rows_of(graded[2], "overfit", "vit_from_scratch")
    for key in ("patchify", "attention", "vit"):
        assert r[key]["status"] in ("failed", "error") and r[key]["message"].startswith("hidden test"), r[key]
    r = rows_of(graded[2], "lib-syntax", "vit_from_scratch")
    assert {x["status"] for x in r.values()} == {"error"} and "SyntaxError" in r["patchify"]["message"]
    r = rows_of(graded[2], "lib-loop", "vit_from_scratch")
    assert r["patchify"]["status"] == "timeout" and r["attention"]["status"] == "passed"


def test_the_reports(graded):
    root, expected, _, _ = graded
    reports = root / "reports"
    assert sorted(p.stem for p in (reports / "feedback").iterdir()) == sorted(expected)
    text = (reports / "feedback" / "tampered.md").read_text()
    assert "**Total: 2 / 9 points**" in text and "double should be 4, got 5" in text
    summary = (reports / "summary.md").read_text()
    assert "## Pass rate per exercise" in summary and "histogram.png" in summary
    assert (reports / "histogram.png").stat().st_size > 1000


def test_a_student_past_the_time_limit_keeps_what_was_graded(tmp_path):
    """A cell that ignores the interrupt: the student's process is killed; the checks that ran still count."""
    fixture_class(tmp_path)
    subs = tmp_path / "submissions"
    for other in subs.iterdir():
        if other.name != "full":
            for f in other.iterdir():
                f.unlink()
            other.rmdir()
    import nbformat

    nb = nbformat.read(subs / "full" / f"{NAME}.ipynb", as_version=4)
    next(
        c for c in nb.cells if c.id == "ex2-solution"
    ).source = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    nbformat.write(nb, subs / "full" / f"{NAME}.ipynb")
    rows = grade_class(subs, tmp_path / "source", options=Options(cell_timeout=2, timeout=15, progress=False))
    assert [(r["exercise"], r["status"]) for r in rows] == [("1", "passed"), ("2", "timeout"), ("3", "timeout")]
    assert "past the limit of 15 s per student" in rows[1]["message"]


def test_clear_errors_for_what_cannot_be_graded(tmp_path, capsys):
    assert main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "holds no student folders" in capsys.readouterr().err
    (tmp_path / "ann").mkdir()
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "r"), "--assignments", "99_nothing"]) == 2
    assert "unknown assignment(s) 99_nothing: choose among 00_setup_tour" in capsys.readouterr().err
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "nothing to grade" in capsys.readouterr().err
