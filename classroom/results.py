"""From an executed grading notebook to one result per exercise: passed, failed, error or timeout, with a message."""

from __future__ import annotations

import re

from .notebooks import Exercise

STATUSES = ("passed", "failed", "error", "timeout")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _first_error(cell):
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out
    return None


def _status(cell) -> str:
    """pending (not started), running (started, never finished) or done; papermill marks the cells it never reached
    'completed' when a run stops, so this reads the start and end times it records instead."""
    meta = cell.get("metadata", {}).get("papermill", {})
    if not meta.get("start_time"):
        return "pending"
    return "done" if meta.get("end_time") else "running"


def _failing_line(traceback: list[str]) -> str:
    lines = [line for entry in traceback for line in _ANSI.sub("", entry).splitlines()]
    arrows = [line.split("---->", 1)[1].strip() for line in lines if line.lstrip().startswith("---->")]
    if arrows:
        return re.sub(r"^\d+\s*", "", arrows[-1])
    return ""


def _first_line(cell) -> str:
    lines = [line.strip() for line in cell.source.splitlines() if line.strip()]
    return (lines[0][:60] + ("…" if len(lines[0]) > 60 else "")) if lines else "(empty)"


def check_outcome(cell, cell_timeout: float | None) -> tuple[str, str]:
    """(kind, message) of one executed check cell: passed, failed, error, timeout or notrun."""
    state = _status(cell)
    if state == "pending":
        return "notrun", ""
    if state == "running":
        return "timeout", "the check was running when the notebook was stopped"
    err = _first_error(cell)
    if err is None:
        return "passed", ""
    ename, evalue = err.get("ename", "Error"), str(err.get("evalue", "")).strip()
    if ename == "KeyboardInterrupt":
        return "timeout", f"the check ran past the limit of {cell_timeout:g} s per cell (an endless loop in your code?)"
    if ename == "AssertionError":
        return "failed", evalue or f"this check failed: {_failing_line(err.get('traceback', [])) or 'an assert'}"
    return "error", f"{ename}: {evalue}" if evalue else ename


def notebook_results(
    nb, exercises: list[Exercise], notes: dict, cell_timeout: float | None, stopped: str | None = None
) -> list[dict]:
    """One dict per exercise (exercise, title, points, max_points, status, message) from an executed grading notebook
    (possibly only partly executed when `stopped` says why it was stopped)."""
    outcomes = {e.key: [] for e in exercises}
    segment = {e.key: [] for e in exercises}
    pending, last_key = [], None
    for cell in nb.cells if nb is not None else []:
        meta = cell.get("metadata", {}).get("classroom")
        if meta is None or meta.get("setup"):
            if cell.cell_type != "code":
                continue
            err = _first_error(cell)
            if _status(cell) == "running" or (err is not None and err.get("ename") == "KeyboardInterrupt"):
                pending.append(
                    (
                        "timeout",
                        f"your cell starting `{_first_line(cell)}` ran past the limit of "
                        f"{cell_timeout:g} s per cell and was interrupted",
                    )
                )
            elif err is not None:
                pending.append(
                    (
                        "raised",
                        f"your cell starting `{_first_line(cell)}` raised "
                        f"{err.get('ename')}: {str(err.get('evalue', '')).strip()}",
                    )
                )
            continue
        key = meta["exercise"]
        if key != last_key and key in segment:
            segment[key], pending, last_key = pending, [], key
        if key in outcomes:
            outcomes[key].append((bool(meta.get("hidden")),) + check_outcome(cell, cell_timeout))
    return [_verdict(e, outcomes[e.key], segment[e.key], notes.get(e.key), stopped) for e in exercises]


def _verdict(e: Exercise, outcomes, segment, note, stopped) -> dict:
    row = dict(exercise=str(e.number), title=e.title, points=0, max_points=e.points)
    bad = [o for o in outcomes if o[1] != "passed"]
    if outcomes and not bad:
        return {**row, "points": e.points, "status": "passed", "message": note or ""}
    hidden, kind, message = bad[0] if bad else (False, "notrun", "")
    if kind == "notrun":
        kind = "timeout" if stopped and stopped.startswith("timeout") else "error"
        message = (
            f"not graded: the notebook was stopped before this check ({stopped})"
            if stopped
            else "not graded: this check did not run"
        )
    else:
        message = ("a hidden check: " if hidden else "") + message
        timeouts = [m for k, m in segment if k == "timeout"]
        raised = [m for k, m in segment if k == "raised"]
        if timeouts and kind != "timeout":
            kind, message = "timeout", f"{timeouts[0]}; then {message}"
        elif raised:
            message = f"{message} ({raised[0]})"
    if note:
        message = f"{message} ({note})"
    return {**row, "status": kind, "message": message}
