"""Grading from a private copy: hidden checks kept outside the course (`--hidden DIR`) count like the notebook's own."""

import csv
import shutil

import pytest
from classroom_fixtures import NAME, answered, instructor_notebook, write

from classroom import release_notebook
from classroom.__main__ import main
from classroom.sandbox import INSTALL

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=INSTALL)


def grade(tmp_path, *extra):
    out = tmp_path / ("reports" + "-".join(extra).replace("/", "_"))
    args = ["grade", str(tmp_path / "submissions"), "--out", str(out), "--source", str(tmp_path / "source")]
    assert main(args + ["--cell-timeout", "20", "--no-progress", *extra]) == 0
    with open(out / "grades.csv") as f:
        return {r["exercise"]: r for r in csv.DictReader(f)}


def test_hidden_checks_from_a_private_folder(tmp_path):
    write(instructor_notebook(), tmp_path / "source")
    small = "def triple(v):\n    return 3 * v if abs(v) < 50 else 0"
    write(answered(release_notebook(instructor_notebook(), NAME), ex2=small), tmp_path / "submissions" / "ann")
    private = tmp_path / "private" / NAME
    private.mkdir(parents=True)
    (private / "2-large.py").write_text('assert triple(100) == 300, "triple(100) should be 300"')
    assert {r["status"] for r in grade(tmp_path).values()} == {"passed"}
    rows = grade(tmp_path, "--hidden", str(tmp_path / "private"))
    assert rows["1"]["status"] == rows["3"]["status"] == "passed"
    assert rows["2"]["points"] == "0" and rows["2"]["message"].startswith("a hidden check: triple(...) on input 4 of 4")
    (private / "7.py").write_text("assert True")
    assert main(["grade", str(tmp_path / "submissions"), "--out", str(tmp_path / "r"), "--source",
                 str(tmp_path / "source"), "--hidden", str(tmp_path / "private")]) == 2  # fmt: skip
