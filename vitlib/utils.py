"""Small helpers every layer of vitlib uses: sizes given as an int or a pair, square grids, atomic CSV (with
spreadsheet-safe cells where asked) and JSON files, paths shown relative to the repository."""

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


def spreadsheet_safe(value) -> str:
    """A cell a spreadsheet shows as text: one starting with = + - @ (a formula) or a tab/CR gets a leading '."""
    text = str(value)
    risky = text[:1] in ("=", "+", "-", "@", "\t", "\r") and len(text) > 1 and not _is_number(text)
    return "'" + text if risky else text


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def write_csv(path, rows: list[dict], columns: list[str] | None = None, escape_formulas: bool = False) -> Path:
    """Rows of dicts as a CSV file, written atomically. The columns: `columns` (other keys left out, missing cells
    empty), else every key in order of first appearance. `escape_formulas`: every cell through `spreadsheet_safe`,
    for a file people open in a spreadsheet whose cells come from others (names, messages); off for data that
    programs read back, which the escaping would change."""

    def write(tmp: Path) -> None:
        keys = list(dict.fromkeys(k for r in rows for k in r)) if columns is None else list(columns)
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            writer.writeheader()
            for r in rows:
                writer.writerow({k: spreadsheet_safe(r.get(k, "")) for k in keys} if escape_formulas else r)

    return replace_atomically(path, write)


def write_json(path, obj, indent: int = 1) -> Path:
    """`obj` as a JSON file (objects JSON does not know are written with str()), written atomically."""
    return replace_atomically(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=indent, default=str)))
