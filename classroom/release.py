"""`make assignments`: the student versions of the course's notebooks and the library starter, from the same sources."""

from __future__ import annotations

from pathlib import Path

import nbformat

from . import library
from .notebooks import parse_exercises, release_notebook


def release_all(source: Path, out: Path, assignments: list[str] | None = None) -> list[Path]:
    """Write out/<notebook>.ipynb for every (or each named) NN_*.ipynb of `source`, and the library starter with its
    visible tests. Returns the files written."""
    from .runner import catalogue

    cat = catalogue(source)
    names = assignments or list(cat)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        if name == library.ASSIGNMENT:
            written += library.release(out)
            continue
        nb = nbformat.read(cat[name], as_version=4)
        student = release_notebook(nb, cat[name].name)
        nbformat.validate(student)
        path = out / cat[name].name
        nbformat.write(student, path)
        written.append(path)
    return written


def points_table(source: Path) -> list[tuple[str, int, str, float]]:
    """(notebook, exercise number, title, points) of every exercise, for the instructor's overview."""
    from .runner import catalogue

    rows = []
    for name, path in catalogue(source).items():
        if name == library.ASSIGNMENT:
            rows += [(name, i, title, pts) for i, (_, title, pts) in enumerate(library.EXERCISES, 1)]
        else:
            rows += [
                (name, e.number, e.title, e.points) for e in parse_exercises(nbformat.read(path, as_version=4), name)
            ]
    return rows
