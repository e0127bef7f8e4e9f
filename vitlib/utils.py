"""Small helpers every layer of vitlib uses: sizes, square grids, atomic CSV/JSON files, repository paths, errors."""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent  # the checkout vitlib runs from (or site-packages when installed)


def repo_relative(text) -> str:
    """str(text) with paths in the repository made relative to it: what a notebook prints, wherever the course lies."""
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
    if n < 1 or math.isqrt(n) ** 2 != n:
        raise ValueError(f"{n} {what} are not a square grid: give the grid as (rows, cols).")
    return math.isqrt(n), math.isqrt(n)


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
    try:
        float(text)  # a number such as -1 or +2.5 is no formula
        return text
    except ValueError:
        return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") and len(text) > 1 else text


def write_csv(path, rows: list[dict], columns: list[str] | None = None, escape_formulas: bool = False) -> Path:
    """An atomic CSV of dict rows, `columns` (else all keys, first seen first); `escape_formulas`: spreadsheet-safe."""

    def write(tmp: Path) -> None:
        keys = list(dict.fromkeys(k for r in rows for k in r)) if columns is None else list(columns)
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({k: spreadsheet_safe(r.get(k, "")) for k in keys} if escape_formulas else r for r in rows)

    return replace_atomically(path, write)


def write_json(path, obj, indent: int = 1) -> Path:
    """`obj` as a JSON file (objects JSON does not know are written with str()), written atomically."""
    return replace_atomically(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=indent, default=str)))


HINTS = {errno.ENOSPC: "the disk is full: free some space or write elsewhere",
         errno.EROFS: "the file system is read-only: write elsewhere",
         errno.EACCES: "no permission: write elsewhere or fix the folder's permissions",
         errno.ENOENT: "no such file or folder: check the path"}  # fmt: skip


def error_text(exc: BaseException) -> str:
    """What went wrong, for a person: the file and a hint for an OS error, what to shrink for out-of-memory."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}: {HINTS.get(exc.errno, 'see the message above it, if any')}"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        return "out of memory: try a smaller model, batch size or image size"
    return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"


class Stopped(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM stopped a run after it saved where it was; `code`: 130 or 143."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@contextlib.contextmanager
def stop_signals():
    """SIGINT and SIGTERM are noted in the list it yields (the loop saves and stops at its next step); a second one
    acts at once. Outside the main thread, signals are left as they are."""
    signals, main = [], threading.current_thread() is threading.main_thread()
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    restore = lambda: [signal.signal(s, handler) for s, handler in old.items()]  # noqa: E731
    for s in old:
        signal.signal(s, lambda signum, frame: (signals.append(signum), restore()))
    try:
        yield signals
    finally:
        restore()


def command_line(main, plain: tuple = (ValueError,)) -> int:
    """Run a command line's main(): a failure ends with `error: ...` and exit code 2 (Ctrl-C: 130), never a traceback
    (`plain` errors: their message alone); `--debug` (taken out of sys.argv) or VITLIB_DEBUG=1 shows the traceback."""
    debug = "--debug" in sys.argv[1:] or os.environ.get("VITLIB_DEBUG") == "1"
    sys.argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a != "--debug"]
    try:
        return main() or 0
    except (KeyboardInterrupt, Exception) as exc:  # the boundary: what a user meets becomes a message
        if debug:
            raise
        if isinstance(exc, KeyboardInterrupt):  # a run stopped by a signal says where it saved
            print(f"error: {exc if isinstance(exc, Stopped) else 'stopped (Ctrl-C)'}", file=sys.stderr)
            return exc.code if isinstance(exc, Stopped) else 130
        text = str(exc) if isinstance(exc, plain) else f"{error_text(exc)} (--debug shows the traceback)"
        print(f"error: {text}", file=sys.stderr)
        return 2
