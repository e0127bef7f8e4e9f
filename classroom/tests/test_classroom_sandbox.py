"""What the grader's sandbox allows and denies, checked from inside it: a probe program tries to read the
instructor's files, write outside its scratch folder, reach the network, use memory, leave a process behind."""

import json
import shutil
import sys
import time
from pathlib import Path

import psutil
import pytest

from classroom import sandbox
from classroom.__main__ import main

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason=sandbox.INSTALL)
REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, os, socket, subprocess, sys

def can_read(p):
    try:
        os.listdir(p) if os.path.isdir(p) else open(p, "rb").read(1)
        return True
    except OSError:
        return False

def can_write(p):
    try:
        with open(p, "w") as f:
            f.write("x")
        return True
    except OSError:
        return False

def network():
    try:
        socket.create_connection(("pypi.org", 443), timeout=3)
        return True
    except OSError:
        return False

out = {"read": {p: can_read(p) for p in sys.argv[1].split(",")},
       "write": {p: can_write(p) for p in sys.argv[2].split(",")},
       "network": network(), "uid": os.getuid(),
       "processes": sorted(int(d) for d in os.listdir("/proc") if d.isdigit())}
try:
    hog = bytearray(8 * 2**30)
    out["8 GB"] = True
except MemoryError:
    out["8 GB"] = False
try:
    with open("big", "wb") as f:
        f.write(b"0" * 300 * 2**20)
    out["300 MB file"] = True
except OSError:
    out["300 MB file"] = False
subprocess.Popen(["sleep", "4243.5"], start_new_session=True)
print(json.dumps(out))
"""


def test_the_sandbox_reads_only_the_environment_and_writes_only_its_scratch(tmp_path):
    scratch, secret = tmp_path / "scratch", tmp_path / "grades.csv"
    scratch.mkdir()
    secret.write_text("student,points\n")
    readable = [sys.executable, str(REPO / "vitlib" / "__init__.py"), "/etc/hostname", "/home/student"]
    hidden = [
        str(secret),
        str(REPO / "notebooks" / "01_patches.ipynb"),
        str(REPO / "classroom" / "instructor" / "test_vit_from_scratch_hidden.py"),
        str(REPO / "README.md"),
        str(REPO / ".git"),
    ]
    writable = ["/home/student/mine.txt", "/tmp/mine.txt"]
    denied = [str(secret), str(REPO / "vitlib" / "planted.py"), "/etc/planted", "/usr/planted"]
    log = tmp_path / "probe.log"
    argv = [sys.executable, "-c", PROBE, ",".join(readable + hidden), ",".join(writable + denied)]
    (uid,) = sandbox.allocate_uids(1)
    sandbox.prepare(scratch, uid)
    outcome = sandbox.run(scratch, argv, 120, log, uid, sandbox.Limits(memory_gb=4))
    assert outcome.returncode == 0, log.read_text()[-2000:]
    found = json.loads(log.read_text().strip().splitlines()[-1])
    assert found["read"] == {p: p in readable for p in readable + hidden}
    assert found["write"] == {p: p in writable for p in writable + denied}
    assert secret.read_text() == "student,points\n" and not (REPO / "vitlib" / "planted.py").exists()
    assert (scratch / "mine.txt").exists()
    assert found["network"] is False
    assert found["8 GB"] is False and found["300 MB file"] is False
    assert len(found["processes"]) <= 3  # bwrap's init, python: its own PID namespace
    if sandbox.os.geteuid() == 0:
        assert found["uid"] == uid
    time.sleep(0.5)
    assert not [p for p in psutil.process_iter(["cmdline"]) if "4243.5" in (p.info["cmdline"] or [])]
    assert outcome.leftover == 0


def test_a_missing_bwrap_is_a_clear_error(tmp_path, monkeypatch, capsys):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "vit_from_scratch.py").write_text("")
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap" in err and "apt-get install bubblewrap" in err


FILL_TMP = "head -c {mb}000000 /dev/zero > /tmp/fill && echo wrote || echo refused"


def _fill(tmp_path, mb, limits):
    scratch = tmp_path / f"scratch-{mb}"
    scratch.mkdir()
    (uid,) = sandbox.allocate_uids(1)
    sandbox.prepare(scratch, uid)
    log = tmp_path / f"fill-{mb}.log"
    outcome = sandbox.run(scratch, ["sh", "-c", FILL_TMP.format(mb=mb)], 60, log, uid, limits)
    return outcome, log.read_text()


def test_the_sandboxs_tmp_is_bounded(tmp_path):
    """/tmp is host memory that RLIMIT_AS does not count (2.8 GB from one job, issue 61): tmpfs has a size."""
    _, text = _fill(tmp_path, 300, sandbox.Limits(tmp_mb=100, cgroup=False))
    assert "refused" in text and "No space left" in text
    _, text = _fill(tmp_path, 50, sandbox.Limits(tmp_mb=100, cgroup=False))
    assert text.strip().endswith("wrote")


@pytest.mark.skipif(not sandbox.cgroup.available(), reason="no cgroup can be made here (limits per process only)")
def test_a_jobs_cgroup_counts_its_tmp_files_and_is_removed(tmp_path):
    """The job's memory is counted with what it writes to /tmp: 600 MB in a 2 GB tmpfs, under a 0.25 GB limit."""
    mine = f"classroom-{sandbox.os.getpid()}-*"  # other tests may be grading at the same time
    outcome, text = _fill(tmp_path, 600, sandbox.Limits(memory_gb=0.25, tmp_mb=2048))
    assert "wrote" not in text or outcome.returncode != 0, text
    _, text = _fill(tmp_path, 50, sandbox.Limits(memory_gb=0.25, tmp_mb=2048))
    assert text.strip().endswith("wrote")
    assert list(sandbox.cgroup.ROOT.rglob(mine)) == []


@pytest.mark.skipif(not sandbox.cgroup.available(), reason="no cgroup can be made here (limits per process only)")
def test_processes_in_sessions_of_their_own_stay_in_the_jobs_cgroup(tmp_path, monkeypatch):
    """issue 61: busy processes, each in its own session (setsid), made the honest student graded beside them time
    out (8/9, 0/9, 7/9): per-process limits do not see them. Every process the job starts is in its cgroup, which has
    the CPU weight every job has and the job's process limit, and none outlives the job."""
    import threading

    made, settings, most = [], {}, []
    real = sandbox.cgroup.make

    def spy(name, memory_bytes, processes):
        group = real(name, memory_bytes, processes)
        made.append(group)
        for folder in group.folders:
            for key in ("cpu.weight", "cpu.shares", "pids.max"):
                if (folder / key).exists():
                    settings[key] = (folder / key).read_text().strip()
        return group

    def watch():  # the group's members while the job runs
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not most[-1:] == ["done"]:
            if made:
                most.append(len(made[0].pids()))
            time.sleep(0.05)

    monkeypatch.setattr(sandbox.cgroup, "make", spy)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (uid,) = sandbox.allocate_uids(1)
    sandbox.prepare(scratch, uid)
    busy = "for i in 1 2 3 4 5 6; do setsid sh -c 'while :; do :; done' & done; sleep 30"
    watcher = threading.Thread(target=watch)
    watcher.start()
    outcome = sandbox.run(scratch, ["sh", "-c", busy], 2, tmp_path / "busy.log", uid, sandbox.Limits(processes=64))
    most.append("done")
    watcher.join()
    assert outcome.returncode is None and outcome.leftover == 0  # stopped at its time limit; nothing left running
    assert max(n for n in most if n != "done") >= 7  # the shell and its six setsid children, all in the group
    assert settings.get("pids.max") == "64" and settings.get("cpu.weight", settings.get("cpu.shares")) in (
        "100",
        "1024",
    )
