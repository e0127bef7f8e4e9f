"""The program that runs inside a sandbox (copied there with capture.py): `python inside.py JOB.json`.

Modes: `notebook` executes a notebook with papermill (the instructor's recording notebook or a student's grading
notebook); `record-library` runs the instructor's tests on the instructor's solution, recording the calls;
`replay-library` replays those calls on the student's file. Whatever it writes is read by the grader as data only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _stopped(message: str) -> None:
    (HERE / "stopped.txt").write_text(message[:2000])


def notebook(job: dict) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    try:
        papermill.execute_notebook(
            job["input"],
            job["output"],
            parameters=job.get("parameters") or None,
            kernel_name=job.get("kernel", "python3"),
            cwd=job["cwd"],
            progress_bar=False,
            execution_timeout=job["cell_timeout"],
            allow_errors=job.get("allow_errors", True),
            interrupt_on_timeout=True,
            start_timeout=120,
        )
    except PapermillExecutionError as exc:
        _stopped(f"{exc.ename}: {exc.evalue} (cell {exc.exec_count})")
    except Exception as exc:  # the kernel died (a student's os._exit), could not start, ...
        first = str(exc).splitlines()[0] if str(exc) else ""
        _stopped(f"{type(exc).__name__}: {first}".strip(": "))


class _Recorder:
    """A pytest plugin: wrap the solution before the tests import it, note which test makes each call."""

    def __init__(self, capture, hidden_file: str):
        self.capture, self.hidden_file = capture, hidden_file

    def pytest_sessionstart(self, session):
        import vit_from_scratch

        self.capture.library_recorder(vit_from_scratch)

    def pytest_runtest_setup(self, item):
        self.capture.set_test(item.name, Path(str(item.fspath)).name == self.hidden_file)


def record_library(job: dict) -> None:
    import capture
    import pytest

    os.chdir(job["cwd"])
    sys.path.insert(0, job["cwd"])
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-x", *job["tests"]]
    code = pytest.main(args, plugins=[_Recorder(capture, job["hidden_file"])])
    if code != 0:
        _stopped(f"the instructor's tests failed on the instructor's solution (pytest exit code {code})")
        return
    capture.save_library(str(HERE))


def replay_library(job: dict) -> None:
    import capture

    os.chdir(job["cwd"])
    sys.path.insert(0, job["cwd"])
    capture.answer_library(job["module"], str(HERE), job["cell_timeout"])


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    sys.path.insert(0, str(HERE))
    {"notebook": notebook, "record-library": record_library, "replay-library": replay_library}[job["mode"]](job)
    return 0


if __name__ == "__main__":
    sys.exit(main())
