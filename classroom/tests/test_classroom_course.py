"""The course's own assignments, graded for real: the instructor's notebook scores full marks, the released one zero,
one with the odd-numbered exercises answered exactly their points; the same for the library assignment.

CI grades notebook 01 (about 20 s a run) and the library; `make check-assignments` grades every notebook this way."""

import shutil
from pathlib import Path

import pytest

from classroom import Options, build_class, compare, grade_class
from classroom.sandbox import INSTALL

COURSE = Path(__file__).resolve().parents[2] / "notebooks"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=INSTALL)


def test_full_zero_and_partial_marks_on_notebook_01_and_the_library(tmp_path):
    assignments = ["01_patches", "vit_from_scratch"]
    expected = build_class(COURSE, tmp_path, assignments)
    assert expected == {
        "instructor": {"01_patches": 6, "vit_from_scratch": 5},
        "released": {"01_patches": 0, "vit_from_scratch": 0},
        "partial": {"01_patches": 3, "vit_from_scratch": 2},
    }
    rows = grade_class(
        tmp_path / "submissions", COURSE, assignments, Options(cell_timeout=300, timeout=900, progress=False)
    )
    assert compare(rows, expected) == []
    assert {r["status"] for r in rows if r["student"] == "instructor"} == {"passed"}
    released = [r for r in rows if r["student"] == "released" and r["assignment"] == "01_patches"]
    assert [r["message"] for r in released][:2] == [
        "fill in the exercise cell first",
        "my_unpatchify returns nothing yet: fill in the exercise cell",
    ]
