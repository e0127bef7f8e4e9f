"""One student's folder never ends the class's grading (issue 61): a folder nested 1,500 deep ended it with a
RecursionError, a Latin-1 folder name with a UnicodeEncodeError in grades.csv, a 254-byte name with Errno 36 for its
feedback file. Each is now that student's own line in the report."""

import csv
import os

from classroom import folders
from classroom.reports import feedback_name, write_reports
from classroom.runner import submitted_file


def nested(folder, depth):
    """`depth` folders inside `folder`, made relative to each other (a path that deep is too long to name)."""
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        fd, old = os.open("d", os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
    os.close(fd)


def unnest(folder):
    """Remove what `nested` made, a level at a time (shutil.rmtree, as pytest uses, recurses past Python's limit)."""
    while (folder / "d").is_dir():
        if (folder / "d" / "d").is_dir():
            os.rename(folder / "d" / "d", folder / "e")
        os.rmdir(folder / "d")
        if (folder / "e").is_dir():
            os.rename(folder / "e", folder / "d")


def test_a_folder_nested_too_deep_is_refused_not_a_crash(tmp_path):
    student = tmp_path / "deep"
    student.mkdir()
    (student / "01_patches.ipynb").write_text("{}")
    nested(student, 1500)
    try:
        assert "nested more than 32 deep" in folders.check_plain(student)
        path, note = submitted_file(student, "01_patches")
        assert path is None and "could not be searched" in note
    finally:
        unnest(student)
    shallow = tmp_path / "shallow"
    shallow.mkdir()
    nested(shallow, 5)
    (shallow / "d" / "01_patches.ipynb").write_text("{}")
    assert folders.check_plain(shallow) is None and submitted_file(shallow, "01_patches")[0].name == "01_patches.ipynb"


def test_reports_for_names_that_are_not_utf8_or_too_long(tmp_path):
    latin = os.fsdecode("caf\xe9".encode("latin-1"))  # a folder name as Python reads it from a Latin-1 file system
    long = "x" * 254
    rows = [
        dict(student=s, assignment="01_patches", exercise="1", points=1, max_points=2, status="failed", message="m")
        for s in (latin, long, "ann")
    ]
    write_reports(rows, tmp_path / "reports")
    with open(tmp_path / "reports" / "grades.csv", encoding="utf-8") as f:
        assert [r["student"] for r in csv.DictReader(f)] == ["caf\\xe9", long, "ann"]
    names = sorted(p.name for p in (tmp_path / "reports" / "feedback").iterdir())
    assert "caf\\xe9.md" in names and "ann.md" in names and len(names) == 3
    assert all(len(n.encode()) <= 200 for n in names)
    assert feedback_name(long) != feedback_name(long[:-1] + "y")  # cut names keep a digest of the whole
