"""Run a command on student code inside a bubblewrap sandbox (`bwrap`, Debian's `bubblewrap`).

What the command sees: the system (/usr, /etc, ...), the Python environment, the vitlib package and the course's data
folders, all read-only; its scratch folder, read-write, at /home/student; an empty /tmp. Not the instructor's notebooks,
the submissions, the reports, the grader's folders or anything else of the machine. No network (a namespace of its
own with only loopback), its own PID namespace (every process it starts is killed when it ends), and limits per
process on memory (address space), processes, CPU time and file size. As root the command runs as an unprivileged
user id of its own (one per job), so its processes can be counted and signal no one else.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import cgroup

HOME = "/home/student"
INSTALL = (
    "the grader runs student code in a bubblewrap sandbox and `bwrap` is not installed: install it with "
    "`apt-get install bubblewrap` (Debian, Ubuntu), `dnf install bubblewrap` (Fedora) or your system's package"
)


class SandboxError(RuntimeError):
    """The sandbox cannot run here: the message says why and what to do."""


@dataclass
class Limits:
    memory_gb: float = 6.0  # address space per process (RLIMIT_AS)
    processes: int = 256  # processes and threads of the job's user (RLIMIT_NPROC)
    file_mb: int = 256  # largest file a process may write (RLIMIT_FSIZE), the executed notebook included
    cpu_s: int | None = None  # CPU seconds per process (RLIMIT_CPU); None: the job's wall-clock limit
    tmp_mb: int = 1024  # size of each of the sandbox's /tmp and /var/tmp (tmpfs: host memory)
    cgroup: bool = True  # each job in a cgroup of its own where the machine allows (CPU share, memory_gb, processes)


@dataclass
class Outcome:
    returncode: int | None  # None when it was stopped at the time limit
    seconds: float
    leftover: int  # processes of the job's user found (and killed) after it ended: 0 unless the sandbox leaks


UID_MIN, UID_MAX = 10**6, 2 * 10**9  # the user ids of sandboxed jobs (no account needed)


def allocate_uids(count: int) -> list[int]:
    """`count` user ids no process uses now, at a random place of [UID_MIN, UID_MAX): two graders running at once
    (or a grader and its tests) never share one, so cleaning up after a job cannot touch another grader's jobs."""
    import random

    used = {p.info["uids"].real for p in psutil.process_iter(["uids"]) if p.info["uids"]}
    while True:
        base = random.randrange(UID_MIN, UID_MAX - count)
        if not any(base <= u < base + count for u in used):
            return list(range(base, base + count))


def bwrap() -> str:
    path = shutil.which("bwrap")
    if not path:
        raise SandboxError(INSTALL)
    return path


def course_root() -> Path:
    """The course's folder: the one that holds the vitlib and course packages (notebooks/, data/ and results/ too)."""
    import vitlib

    return Path(vitlib.__file__).resolve().parent.parent


def course_notebooks() -> Path:
    """Where the course's notebooks are (some read their own file)."""
    return course_root() / "notebooks"


def _readable() -> list[Path]:
    """What the sandbox may read: the interpreter and its environment, the source of vitlib and of the course, and
    the course's data and results."""
    import course

    root = course_root()
    paths = [Path("/usr"), Path("/etc"), Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parent]
    paths += [root / "vitlib", Path(course.__file__).resolve().parent]
    paths += [root / d for d in ("data", "results") if (root / d).is_dir()]
    return [p for p in dict.fromkeys(p.resolve() for p in paths) if p.exists()]


def command(
    scratch: Path, argv: list[str], uid: int | None, views: dict | None = None, tmp_mb: int = 1024
) -> list[str]:
    """The bwrap command line that runs `argv` with `scratch` at /home/student (the working folder) and each folder of
    `views` ({host folder: path in the sandbox}) read-only where the notebooks expect it."""
    root = os.geteuid() == 0
    cmd = [bwrap(), "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if root:  # no user namespace: the command drops to `uid` itself (setpriv), so its processes have their own uid
        cmd += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    else:
        cmd += ["--unshare-all"]
    # the private /tmp first: what is bound below may lie under /tmp on the host (a checkout or venv in /tmp)
    size = ["--size", str(tmp_mb * 2**20)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs", "/tmp"]
    cmd += ["--perms", "1777", *size, "--tmpfs", "/var/tmp"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / name
        if p.is_symlink():
            cmd += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            cmd += ["--ro-bind", str(p), str(p)]
    readable = _readable()
    parents = {q for p in readable for q in p.parents if q != Path("/")}
    private = {Path("/tmp"), Path("/var/tmp"), Path("/proc"), Path("/dev")}
    for q in sorted(q for q in parents - private if not any(q == r or r in q.parents for r in readable)):
        cmd += ["--perms", "0755", "--dir", str(q)]  # the folders above (like /root) without their host permissions
    for p in readable:
        cmd += ["--ro-bind", str(p), str(p)]
    for host, inside in (views or {}).items():
        cmd += ["--ro-bind", str(host), str(inside)]
    cmd += ["--perms", "0755", "--dir", "/home", "--bind", str(scratch), HOME, "--chdir", HOME, "--"]
    if root and uid is not None:
        setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
        cmd += [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
        cmd += ["--bounding-set=-all", "--no-new-privs"]
    return cmd + argv


def environment() -> dict[str, str]:
    path = os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]))
    return {
        "HOME": HOME,
        "PATH": path,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{HOME}/.config/matplotlib",
    }


def _limit(limits: Limits, timeout: float, group: cgroup.JobGroup | None = None):
    cpu = int(limits.cpu_s or max(10, timeout))
    memory = int(limits.memory_gb * 2**30)

    def apply():  # in the child, before bwrap runs: bwrap and everything it starts inherit them
        if group is not None:
            group.join()
        try:  # bwrap dies with the grader's thread that started it (a grader killed outright stops its jobs)
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if os.geteuid() == 0:  # counted per user id: the job's own (root is not limited)
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))

    return apply


def prepare(scratch: Path, uid: int | None) -> None:
    """Give the scratch folder (and all in it) to the job's user; the rest of the grader's folders stay root's."""
    if os.geteuid() != 0 or uid is None:
        return
    for dirpath, dirnames, filenames in os.walk(scratch):
        for name in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            os.lchown(name, uid, uid)
    os.chmod(scratch, 0o700)


def _of_user(uid: int) -> list:
    return [
        p
        for p in psutil.process_iter(["uids", "status"])
        if p.info["uids"] and p.info["uids"].real == uid and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def _leftovers(uid: int | None) -> int:
    """Processes of the job's user still alive 5 s after the sandbox ended (the kernel kills a PID namespace's
    processes when its first process ends, not instantly): killed, and counted."""
    if os.geteuid() != 0 or uid is None:
        return 0
    deadline = time.monotonic() + 5
    while _of_user(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    found = _of_user(uid)
    for p in found:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return len(found)


def run(
    scratch: Path,
    argv: list[str],
    timeout: float,
    log: Path,
    uid: int | None,
    limits: Limits,
    views: dict | None = None,
) -> Outcome:
    """Run `argv` in the sandbox, in a cgroup of its own where the machine allows; kill it (and every process it
    started) after `timeout` seconds."""
    start = time.monotonic()
    name = f"classroom-{os.getpid()}-{uid}-{time.monotonic_ns()}"
    group = cgroup.make(name, int(limits.memory_gb * 2**30), limits.processes) if limits.cgroup else None
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command(scratch, argv, uid, views, limits.tmp_mb),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment(),
            preexec_fn=_limit(limits, timeout, group),
            start_new_session=True,
            close_fds=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
            os.killpg(proc.pid, signal.SIGKILL)  # bwrap; --die-with-parent takes the namespace's processes with it
            proc.wait()
    if group is not None:
        group.close()
    return Outcome(code, round(time.monotonic() - start, 1), _leftovers(uid))


def check() -> None:
    """A clear SandboxError when bwrap is missing or cannot make a sandbox here (no user namespaces, ...)."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"classroom-sandbox-check-{os.getpid()}"
    scratch.mkdir(exist_ok=True)
    try:
        proc = subprocess.run(
            command(scratch, ["true"], None), capture_output=True, text=True, timeout=60, env=environment()
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        raise SandboxError(
            f"bwrap cannot make a sandbox here ({proc.stderr.strip()[:300]}): run the grader as root, or enable "
            f"unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
        )
