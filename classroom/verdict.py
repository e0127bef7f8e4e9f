"""Verdicts: the student's answers (data from the sandbox) against the instructor's (data from the instructor's run).

Runs in the grader, which never runs student code: a file a student wrote is only parsed (with a size limit), and
anything it holds that is not well-formed data is a wrong answer. Numbers compare within a tolerance (an int and a
float of the same value are equal; a bool is not a number), strings without regard to case and spacing (as
`check_answer` does), arrays by shape, kind and values (rtol 1e-4, atol 1e-5), sequences, dicts and modules' weights
element by element.
"""

from __future__ import annotations

import base64
import json
import math
import os
import stat
from pathlib import Path

import numpy as np

MAX_BYTES = 256 * 2**20
RTOL, ATOL = 1e-4, 1e-5
_NAMES = {"num": "a number", "str": "a string", "bool": "a bool", "none": "None", "seq": "a list or tuple",
          "dict": "a dict", "set": "a set", "array": "an array (tensor)", "module": "a module", "record": "a record",
          "todo": "`...` (not answered yet)", "object": "an object", "missing": "not defined",
          "callable": "a function", "bigarray": "an array (tensor)"}  # fmt: skip


def read_beneath(root: Path, relative: str | Path, limit: int = MAX_BYTES) -> bytes | None:
    """The bytes of root/relative, opened one folder at a time without following a link (O_NOFOLLOW): None when a
    part of the path is a link, the file is missing, not a regular file or over `limit` bytes. How the grader reads
    what a sandbox wrote: a link its code made (to a neighbour's answers, say) is never followed on the host."""
    parts = Path(relative).parts
    if not parts or any(p in ("..", "/") for p in parts):
        return None
    fds = []
    try:
        fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY))
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1]))
        info = os.fstat(fds[-1])
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fds[-1], limit + 1) if info.st_size else b""
        while len(data) <= limit and (more := os.read(fds[-1], limit + 1 - len(data))):
            data += more
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def load(root: Path, relative: str | Path) -> dict | None:
    """A JSON object from root/relative (read as `read_beneath` does), or None when it is missing, a link, too large
    or not a JSON object."""
    raw = read_beneath(root, relative)
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _kind(v) -> str:
    return v[0] if isinstance(v, list) and v and isinstance(v[0], str) else "malformed"


def _describe(v) -> str:
    k = _kind(v)
    if k == "object" and len(v) > 1:
        return f"an object of type {str(v[1])[:60]}"
    return _NAMES.get(k, "malformed data")


def _number(x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise ValueError("not a number")
    return float(x)


def _array(v):
    _, dtype, shape, data = v
    a = np.frombuffer(base64.b64decode(data, validate=True), dtype=np.dtype(dtype))
    return a.reshape([int(s) for s in shape])


def differ(expected, got, rtol: float = 0.0) -> str | None:
    """None when `got` is the expected value (numbers within `rtol` of it, for a measured answer); else what differs,
    without giving the expected value away."""
    try:
        return _differ(expected, got, rtol)
    except (ValueError, TypeError, IndexError, KeyError, RecursionError, OverflowError):
        return "it is not well-formed data"


def _differ(e, g, rtol: float = 0.0) -> str | None:
    ke, kg = _kind(e), _kind(g)
    if {ke, kg} == {"array", "bigarray"}:  # one array over MAX_ARRAY bytes, the other not: not the same array
        return _differ_layout(e, g) or f"its dtype is {np.dtype(g[1])}, not {np.dtype(e[1])}"
    if ke != kg:
        return f"it is {_describe(g)}, not {_describe(e)}"
    if ke in ("none", "todo", "missing"):
        return None
    if ke == "bool":
        return None if g[1] is e[1] else "it is the wrong bool"
    if ke == "num":
        a, b = _number(e[1]), _number(g[1])
        if math.isnan(a) and math.isnan(b):
            return None
        return None if math.isclose(a, b, rel_tol=max(rtol, 1e-6), abs_tol=1e-9) else "it is the wrong number"
    if ke == "str":
        same = " ".join(str(e[1]).lower().split()) == " ".join(str(g[1]).lower().split())
        return None if same and isinstance(g[1], str) else "it is not the answer"
    if ke == "array":
        return _differ_arrays(_array(e), _array(g), rtol)
    if ke in ("seq", "set"):
        if _length(e) != _length(g):
            return f"it has {_length(g)} items, not {_length(e)}"
        for i, (x, y) in enumerate(zip(e[1], g[1])):
            d = _differ(x, y, rtol)
            if d:
                return f"item {i}: {d}"
        return None if e[2:] == g[2:] else f"items from {len(e[1]):,} on differ"
    if ke == "callable":
        return None  # what it does is judged by the recorded calls of it
    if ke == "bigarray":
        return _differ_big(e, g, rtol)
    if ke == "dict":
        ek, gk = [json.dumps(k) for k, _ in e[1]], [json.dumps(k) for k, _ in g[1]]
        if sorted(ek) != sorted(gk):
            return "its keys are not the expected ones"
        got = {json.dumps(k): v for k, v in g[1]}
        for k, v in e[1]:
            d = _differ(v, got[json.dumps(k)], rtol)
            if d:
                return f"[{json.loads(json.dumps(k))[-1]!r}]: {d}"
        return None
    if ke in ("module", "record"):
        return _differ(e[2], g[2], rtol) if e[1] == g[1] else f"it is a {str(g[1])[:60]}, not a {e[1]}"
    if ke == "object":
        return None if e[1] == g[1] else f"it is {_describe(g)}, not {_describe(e)}"
    if ke == "raises":
        return None if e[1] == g[1] else f"it raised {g[1]}, not {e[1]}"
    return "it is not well-formed data"


KINDS = {"b": "bool", "i": "int", "u": "int", "f": "float"}


def _differ_layout(e, g) -> str | None:
    """Shape and kind of two encoded arrays (["array" or "bigarray", dtype, shape, ...]), or None when they agree."""
    de, dg = np.dtype(e[1]), np.dtype(g[1])
    if [int(n) for n in e[2]] != [int(n) for n in g[2]]:
        return f"its shape is {tuple(g[2])}, not {tuple(e[2])}"
    if KINDS.get(de.kind) != KINDS.get(dg.kind):
        return f"its dtype is {dg}, expected a {KINDS.get(de.kind, de.kind)} dtype"
    return None


def _differ_arrays(a, b, rtol: float = 0.0) -> str | None:
    if a.shape != b.shape:
        return f"its shape is {tuple(b.shape)}, not {tuple(a.shape)}"
    if KINDS.get(a.dtype.kind) != KINDS.get(b.dtype.kind):
        return f"its dtype is {b.dtype}, expected a {KINDS.get(a.dtype.kind, a.dtype.kind)} dtype"
    if a.dtype.kind == "f":
        if np.allclose(b, a, rtol=max(RTOL, rtol), atol=ATOL, equal_nan=True):
            return None
        worst = np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64))) if a.size else 0
        return f"its values differ (largest difference {worst:.3g})"
    return None if np.array_equal(a, b) else f"{int(np.sum(a != b))} of its {a.size} values differ"


def _length(v) -> int:
    """Items of an encoded sequence: those encoded one by one and the rest under a digest."""
    return len(v[1]) + (int(v[2][1]) if len(v) > 2 else 0)


def _differ_big(e, g, rtol: float) -> str | None:
    """A large array by shape, kind, statistics (mean, std, min, max, NaNs) and 4,096 elements spread over it."""
    stats, sample = e[3], e[4]
    layout = _differ_layout(e, g)
    if layout:
        return layout
    if not all(math.isclose(_number(x), _number(y), rel_tol=max(rtol, RTOL), abs_tol=ATOL) or x == y
               for x, y in zip(stats, g[3], strict=True)):  # fmt: skip
        return "its values differ (their statistics)"
    return _differ(sample, g[4], rtol)


def _call_text(call: dict, index: int, count: int) -> str:
    where = f"hidden test {call['test']}: " if call.get("test") and call.get("phase") == "hidden" else ""
    where = where or (f"test {call['test']}: " if call.get("test") else "")
    return f"{where}{call.get('name')}(...) on input {index + 1} of {count} of the checks"


def judge(
    expected: dict, answers: dict | None, calls: list[int] | None = None, rtol: dict | None = None
) -> tuple[str, str, bool]:
    """(status, message, hidden) of one exercise: status passed, failed, error or timeout; `hidden` when the first
    difference is a call of a hidden check. `calls`: the indices of expected['calls'] that count (default all);
    `rtol`: {answer name: relative tolerance} for answers measured in the run (course.rtol of the check cell)."""
    if not expected.get("values") and not (expected.get("calls") if calls is None else calls):
        return "error", "not graded: the instructor's run recorded nothing to compare for this exercise", False
    if answers is None:
        return "error", "not graded: your answers were not collected (your notebook stopped before this check)", False
    got_values = answers.get("values") if isinstance(answers.get("values"), dict) else {}
    for name, value in expected.get("values", {}).items():
        g = got_values.get(name, ["missing"])
        if _kind(g) == "todo":
            return "failed", f"`{name}` is still `...`: fill in the exercise cell", False
        d = differ(value, g, (rtol or {}).get(name, 0.0))
        if d:
            return "failed", f"`{name}`: {d}", False
    exp_calls, got_calls = expected.get("calls", []), answers.get("calls")
    got_calls = got_calls if isinstance(got_calls, list) else []
    indices = calls if calls is not None else list(range(len(exp_calls)))
    for n, i in enumerate(indices):
        call, text = exp_calls[i], _call_text(exp_calls[i], n, len(indices))
        hidden = call.get("phase") == "hidden"
        if i >= len(got_calls):
            return "error", f"{text}: not run (your code stopped before it)", hidden
        g = got_calls[i]
        if _kind(g) == "timeout":
            return "timeout", f"{text}: ran past the time limit (an endless loop?)", hidden
        if _kind(g) == "missing":
            return "error", f"`{call.get('name')}` is not defined", hidden
        if _kind(g) == "raises" and _kind(call.get("out")) != "raises":
            detail = f"{g[1]}: {g[2]}" if len(g) > 2 and g[2] else str(g[1])
            if str(g[1]) == "NotImplementedError":
                return "failed", f"{text}: not implemented yet ({g[2] if len(g) > 2 else ''})", hidden
            return "error", f"{text} raised {detail[:300]}", hidden
        d = differ(call.get("out"), g)
        if d:
            return "failed", f"{text}: the output is wrong: {d}", hidden
    return "passed", "", False


def tolerances(cells, where: str) -> dict:
    """metadata course.rtol of an exercise-check cell, {name: relative tolerance}: an answer measured in the run (a
    speed, a time) cannot equal the instructor's run, only come near it."""
    found = [c["metadata"]["course"]["rtol"] for c in cells if "rtol" in c.get("metadata", {}).get("course", {})]
    value = found[0] if found else {}
    ok = isinstance(value, dict) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 10 for v in value.values()
    )
    if not ok:
        raise ValueError(f"{where}: metadata course.rtol maps answer names to tolerances in [0, 10), got {value!r}.")
    return value
