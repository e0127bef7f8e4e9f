"""One control group per sandboxed job: its own CPU share, memory (tmpfs included) and number of processes.

Limits per process (rlimits) cannot stop a job of 200 busy processes from slowing its neighbours, nor count the
memory of files in its /tmp; a cgroup can. The grader makes one under its own cgroup where the machine lets it (root
with cgroup v1 controllers, or a delegated cgroup v2), puts the job's first process in it before bwrap starts, and
removes it when the job is over. Where neither is possible `make` returns None and the job runs with the per-process
limits alone (the grader says so once).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1 = ("cpu", "memory", "pids")


def _own(controller: str) -> str | None:
    """This process's cgroup path for a v1 `controller` ('' for v2), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(",") or (controller == "" and names == ""):
            return path.lstrip("/")
    return None


def _settings(memory_bytes: int, processes: int) -> dict[str, dict[str, str]]:
    v1 = {"cpu": {"cpu.shares": "1024"}, "memory": {"memory.limit_in_bytes": str(memory_bytes)}}
    v1["pids"] = {"pids.max": str(processes)}
    v2 = {
        "": {"cpu.weight": "100", "memory.max": str(memory_bytes), "memory.swap.max": "0", "pids.max": str(processes)}
    }
    return v1 if all((ROOT / c).is_dir() for c in V1) else v2


class JobGroup:
    """The folders of one job's cgroup (one per v1 controller, or one v2 folder)."""

    def __init__(self, folders: list[Path]):
        self.folders = folders

    def join(self) -> None:
        """Put the calling process in the group (run in the job's child before it execs bwrap)."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        return sorted({int(p) for f in self.folders if f.is_dir() for p in (f / "cgroup.procs").read_text().split()})

    def close(self) -> None:
        """Kill what is left in the group and remove it."""
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for folder in self.folders:
            try:
                folder.rmdir()
            except OSError:
                pass


def make(name: str, memory_bytes: int, processes: int) -> JobGroup | None:
    """A cgroup `name` under this process's own, with the job's limits; None where the machine does not allow it."""
    made = []
    try:
        for controller, values in _settings(memory_bytes, processes).items():
            own = _own(controller)
            if own is None:
                raise OSError(f"no {controller or 'v2'} cgroup")
            folder = ROOT / controller / own / name
            folder.mkdir()
            made.append(folder)
            for key, value in values.items():
                if (folder / key).exists() or key != "memory.swap.max":  # a missing limit is no cgroup
                    (folder / key).write_text(value)
        return JobGroup(made)
    except OSError:
        JobGroup(made).close()
        return None


def available() -> bool:
    """Whether a job's cgroup can be made here."""
    group = make(f"classroom-check-{os.getpid()}-{time.monotonic_ns()}", 2**30, 64)
    if group is not None:
        group.close()
    return group is not None
