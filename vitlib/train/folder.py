"""The run folder (out=): checked before any work, held by one run at a time (`out/.lock` with the owner's pid; a
lock whose process is gone is taken over), and cleared of the temporary files a killed run left behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

LOCK = ".lock"
TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)$")  # vitlib.utils.replace_atomically: .<name>.tmp-<pid>


class RunFolderError(RuntimeError):
    """The output folder cannot be used: not a folder, not writable, or in use by another run."""


def say(message: str) -> None:
    print(f"vitlib.train: {message}", file=sys.stderr, flush=True)


def check_folder(out: Path) -> None:
    """Raise a RunFolderError, before anything is written, when `out` cannot be created or written."""
    if out.exists() and not out.is_dir():
        raise RunFolderError(
            f"out={str(out)!r} is an existing file, not a folder: choose a folder for the run (new or a run's), "
            f"e.g. out={str(out.with_name(out.name + '-run'))!r}. The file was left as it is."
        )
    parent = out
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise RunFolderError(
            f"out={str(out)!r} cannot be created: {parent} is a file, not a folder. Choose another output folder."
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RunFolderError(
            f"out={str(out)!r} cannot be written: no permission to write in {parent}. Choose a folder you can write "
            f"to (e.g. under your home or runs/)."
        )


def _start_time(pid: int) -> str | None:
    """When process `pid` started (Linux: /proc/<pid>/stat field 22), to tell a reused pid from the lock's owner."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


class RunLock:
    """out/.lock, created exclusively (O_EXCL) with the owner's pid, host and start time; `release` removes it."""

    def __init__(self, out: Path):
        self.path, self.held, self.created = Path(out) / LOCK, False, False

    def _owner(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def _stale(self, owner: dict) -> bool:
        """Whether the lock's owner is gone: a process on this host that no longer runs (or a new one with its pid)."""
        if owner.get("host") not in (None, socket.gethostname()):
            return False  # a process on another machine: it cannot be checked from here
        pid = owner.get("pid")  # not a number: an empty or damaged lock file, whose writer died while writing it
        if not isinstance(pid, int) or not pid_alive(pid):
            return True
        started = owner.get("started_at")
        return started is not None and _start_time(pid) not in (None, started)

    def acquire(self) -> RunLock:
        self.created = not self.path.parent.exists()  # removed again by release() if the run leaves it empty
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunFolderError(
                f"cannot create the output folder {self.path.parent} ({err.strerror}): choose another out folder."
            ) from err
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": _start_time(os.getpid())}
        me["since"] = time.strftime("%Y-%m-%d %H:%M:%S")
        for _ in range(5):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                owner = self._owner()
                if not self._stale(owner):
                    where = f" on {owner['host']}" if owner.get("host") != socket.gethostname() else ""
                    raise RunFolderError(
                        f"{self.path.parent} is in use by another run (pid {owner.get('pid')}{where}, since "
                        f"{owner.get('since', '?')}): two runs in one folder would overwrite each other's files. "
                        f"Wait for it to finish or choose another out folder. If no run uses it any more, delete "
                        f"{self.path}."
                    ) from None
                self.path.unlink(missing_ok=True)  # another starting run may have removed it first: try again
                say(f"took over the lock {self.path} of process {owner.get('pid')}, which is no longer running.")
                continue
            except OSError as err:
                raise RunFolderError(
                    f"cannot write in the output folder {self.path.parent} ({err.strerror}): choose another out folder."
                ) from err
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self.held = True
            return self
        raise RunFolderError(f"could not take the lock {self.path}: other runs keep taking it. Try again.")

    def release(self) -> None:
        if self.held:
            self.held = False
            if self._owner().get("pid") == os.getpid():  # never remove a lock another run took over
                self.path.unlink(missing_ok=True)
            if self.created:  # a run refused before it wrote anything leaves no empty folder behind
                with contextlib.suppress(OSError):  # not empty: the run's files
                    self.path.parent.rmdir()


def remove_stale_temporaries(out: Path) -> None:
    """Delete (and name) the temporary files (.<name>.tmp-PID) that a process no longer running left in `out`."""
    for path in sorted(out.iterdir()):
        match = TEMPORARY.match(path.name)
        if not match or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or pid_alive(pid):
            continue
        size = path.stat().st_size
        path.unlink(missing_ok=True)
        say(f"removed {path} ({_size(size)}), a temporary file left by process {pid}, which is no longer running.")


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
