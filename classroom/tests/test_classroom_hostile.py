"""A hostile class (issue 27): every cheat scores exactly what its honest work earns, the honest students are
unaffected, the instructor's files and the other submissions stay byte-identical, no process outlives the grading
and the reports are the grader's own. Needs bubblewrap (skipped without it; CI installs it)."""

import csv
import hashlib
import shutil
import subprocess
import sys
import time

import psutil
import pytest
from classroom_fixtures import MARKER, NAME, QUIZ, hostile_class

from classroom.sandbox import INSTALL

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=INSTALL)


def fingerprint(folder):
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*")
            if p.is_file() and not p.is_symlink()}  # fmt: skip


def leftovers():
    """Processes the hostile students started (their command lines carry MARKER). Processes of the grader's job user
    ids are checked by the grader itself (a warning on stderr): other tests may be grading at the same time."""
    return [p.pid for p in psutil.process_iter(["cmdline"]) if any(MARKER in part for part in p.info["cmdline"] or [])]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    expected = hostile_class(root)
    before = {"source": fingerprint(root / "source"), "submissions": fingerprint(root / "submissions")}
    cmd = [sys.executable, "-m", "classroom", "grade", str(root / "submissions"), "--out", str(root / "reports")]
    cmd += ["--source", str(root / "source"), "--cell-timeout", "20", "--timeout", "120", "--workers", "2"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    grades = (root / "reports" / "grades.csv").read_bytes()
    time.sleep(3)  # a detached process would rewrite the reports now
    with open(root / "reports" / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    return root, expected, before, rows, grades, run


def test_every_cheat_scores_what_its_honest_work_earns(graded):
    _, expected, _, rows, _, _ = graded
    got = {}
    for r in rows:
        if not r["student"].startswith(("'", ".")):
            got[r["student"]] = got.get(r["student"], 0) + float(r["points"])
    assert got == {s: p for s, p in expected.items() if not s.startswith("=")}


def test_nothing_outside_the_scratch_copies_changed(graded):
    root, _, before, _, grades, _ = graded
    assert fingerprint(root / "source") == before["source"]
    assert fingerprint(root / "submissions") == before["submissions"]
    assert (root / "reports" / "grades.csv").read_bytes() == grades
    assert not list(root.glob("reports/.reports-*"))  # the reports were renamed into place


def test_no_process_outlives_the_grading(graded):
    assert leftovers() == []
    assert "outlived their sandbox" not in graded[5].stderr


def test_refused_links_reported_folders_and_safe_cells(graded):
    _, _, _, rows, _, run = graded
    by = {(r["student"], r["assignment"], r["exercise"]): r for r in rows}
    assert "is a symbolic link" in by[("linker", NAME, "1")]["message"]
    assert "etc-link/etc is a symbolic link" in by[("etc-link", NAME, "1")]["message"]
    assert by[(".hidden-student", "-", "-")]["message"].startswith("not graded: a folder whose name starts with '.'")
    assert ".hidden-student" in run.stderr
    assert by[("formula", NAME, "2")]["message"].startswith("'=HYPERLINK(1)")
    assert [r["student"] for r in rows if "1+2" in r["student"]][0] == "'=1+2"


def test_the_quiz_is_judged_by_the_instructors_answer_not_by_check_answer(graded):
    by = {(r["student"], r["assignment"]): r for r in graded[3]}
    assert by[("fake-check", QUIZ)]["points"] == "0" and by[("honest-quiz", QUIZ)]["points"] == "1"


def test_the_library_cheats_get_nothing(graded):
    for student in ("lib-patched", "lib-atexit"):
        rows = [r for r in graded[3] if r["student"] == student and r["assignment"] == "vit_from_scratch"]
        assert len(rows) == 5 and {r["points"] for r in rows} == {"0"}


def test_library_rules_are_checked_on_the_code_that_ran(graded):
    by = {(r["student"], r["exercise"]): r for r in graded[3] if r["assignment"] == "vit_from_scratch"}
    assert "changed while it ran" in by[("lib-rewrites-itself", "patchify")]["message"]
    assert "vit_from_scratch sits beside vit_from_scratch.py" in by[("lib-package", "patchify")]["message"]
