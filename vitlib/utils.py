"""Small helpers every layer of vitlib uses: sizes given as an int or a pair, square grids, atomic CSV and JSON
files, paths shown relative to the repository."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout vitlib runs from (or site-packages when installed)


def repo_relative(text) -> str:
    """str(text) with the repository's absolute location taken out: paths inside it become relative to it, so that
    what a notebook prints does not depend on where the course lies on the machine that ran it."""
    return str(text).replace(f"{REPO_ROOT}{os.sep}", "").replace(str(REPO_ROOT), ".")


def pair(size, name: str = "size") -> tuple[int, int]:
    """An int or a (height, width) pair as a (height, width) tuple of ints."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size, size
    try:
        h, w = size
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an int or a (height, width) pair, got {size!r}.") from None
    return int(h), int(w)


def square_grid(n: int, what: str = "patch embeddings") -> tuple[int, int]:
    """(side, side) for n = side^2, or a clear error saying that the grid must be given."""
    side = math.isqrt(n) if n >= 0 else -1
    if side < 1 or side * side != n:
        raise ValueError(f"{n} {what} are not a square grid: give the grid as (rows, cols).")
    return side, side


def replace_atomically(path: Path, write) -> Path:
    """Write through a temporary file and rename it over `path`: readers see the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_csv(path, rows: list[dict]) -> Path:
    """Rows of dicts as a CSV file (the columns: every key, in order of first appearance), written atomically."""

    def write(tmp: Path) -> None:
        keys = list(dict.fromkeys(k for r in rows for k in r))
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)

    return replace_atomically(path, write)


def write_json(path, obj, indent: int = 1) -> Path:
    """`obj` as a JSON file (objects JSON does not know are written with str()), written atomically."""
    return replace_atomically(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=indent, default=str)))
