"""The library assignment: a ViT written from scratch in one file, graded with pytest.

One instructor source, `assignment/vit_from_scratch.py`, holds the answers between `# BEGIN SOLUTION` and
`# END SOLUTION`; the starter replaces each block by `raise NotImplementedError(...)`. `test_vit_from_scratch.py` is
released with it; `test_vit_from_scratch_hidden.py` stays with the instructor. A test belongs to the exercise its name
starts with (test_<exercise>_...); an exercise earns its points when all its tests, visible and hidden, pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ASSIGNMENT = "vit_from_scratch"
FILENAME = ASSIGNMENT + ".py"
HERE = Path(__file__).resolve().parent / "assignment"
SOURCE = HERE / FILENAME
VISIBLE_TESTS = HERE / "test_vit_from_scratch.py"
HIDDEN_TESTS = HERE / "test_vit_from_scratch_hidden.py"
CONFTEST = HERE / "conftest.py"
# (exercise = test name prefix, title, points)
EXERCISES = [
    ("patchify", "patchify: an image as a sequence of flattened patches", 1),
    ("patch_embedding", "PatchEmbedding.forward: x_p E", 1),
    ("attention", "MultiHeadSelfAttention.forward, written out", 1),
    ("block", "EncoderBlock.forward: the pre-LN block", 1),
    ("vit", "VisionTransformer.forward: eq. (1)-(4)", 1),
]
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"


def starter_source(source: str, keep: set[str] = frozenset()) -> str:
    """The instructor source with every solution block replaced by `raise NotImplementedError("<where>: ...")`, except
    the blocks of the functions named in `keep` (e.g. "patchify", "PatchEmbedding.forward")."""
    out, inside, where, cls, keeping = [], False, "this function", None, False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if not inside:
            m = re.match(r"(\s*)(class|def)\s+(\w+)", line)
            if m and m[2] == "class" and not m[1]:
                cls = m[3]
            elif m and m[2] == "def":
                where = f"{cls}.{m[3]}" if m[1] and cls else m[3]
                cls = cls if m[1] else None
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"line {number}: {BEGIN} inside another solution block.")
            inside, keeping = True, where in keep
            indent = line[: len(line) - len(line.lstrip())]
            if not keeping:
                out.append(f'{indent}raise NotImplementedError("{where}: write your code here")')
        elif stripped == END:
            if not inside:
                raise ValueError(f"line {number}: {END} without {BEGIN}.")
            inside = False
        elif not inside or keeping:
            out.append(line)
    if inside:
        raise ValueError(f"a solution block is not closed by {END}.")
    return "\n".join(out) + "\n"


def solution_lines(source: str) -> list[str]:
    """Lines inside the solution blocks that appear nowhere else in the source (what must never be released)."""
    inside, lines, others = False, [], set()
    for line in source.splitlines():
        s = line.strip()
        if s in (BEGIN, END):
            inside = s == BEGIN
        elif inside:
            lines.append(s)
        else:
            others.add(s)
    return [s for s in lines if s and s not in others]


def release(out_dir: Path) -> list[Path]:
    """Write the starter file and the visible tests."""
    source = SOURCE.read_text()
    starter = starter_source(source)
    leaked = [s for s in solution_lines(source) if s in {line.strip() for line in starter.splitlines()}]
    if leaked:
        raise ValueError(f"the starter would contain solution lines: {leaked[:3]}")
    (out_dir / FILENAME).write_text(starter)
    (out_dir / VISIBLE_TESTS.name).write_text(VISIBLE_TESTS.read_text())
    return [out_dir / FILENAME, out_dir / VISIBLE_TESTS.name]


def _exercise_of(test_name: str) -> str | None:
    name = test_name.removeprefix("test_")
    return next((key for key, _, _ in EXERCISES if name.startswith(key)), None)


def _outcome(case) -> tuple[str, str]:
    bad = case.find("failure") if case.find("failure") is not None else case.find("error")
    if bad is None:
        return ("skipped", "skipped") if case.find("skipped") is not None else ("passed", "")
    text = (bad.get("message") or "").strip()
    if not text:
        e_lines = [line[1:].strip() for line in (bad.text or "").splitlines() if line.startswith("E ")]
        text = e_lines[0] if e_lines else "failed"
    first = text.splitlines()[0]
    if first.startswith("TimeoutError"):
        return "timeout", first.split(":", 1)[-1].strip()
    if first.startswith("NotImplementedError"):
        return "failed", "not implemented yet (" + first.split(":", 1)[-1].strip() + ")"
    if first.startswith("AssertionError") or bad.tag == "failure" and first.startswith("assert"):
        return "failed", first.removeprefix("AssertionError:").strip()
    return "error", first


def _error_summary(case) -> str:
    bad = case.find("error") if case.find("error") is not None else case.find("failure")
    lines = [line[1:].strip() for line in (bad.text or "").splitlines() if line.startswith("E ")]
    return lines[-1] if lines else (bad.get("message") or "collection failed")


def junit_results(path: Path | None, stopped: str | None = None) -> list[dict]:
    """One dict per exercise from pytest's junit XML (None or missing when pytest never finished)."""
    cases = list(ET.parse(path).getroot().iter("testcase")) if path is not None and path.exists() else []
    broken = [c for c in cases if not c.get("classname")]  # a test file that could not be collected
    cases = [c for c in cases if c.get("classname")]
    rows = []
    for key, title, points in EXERCISES:
        row = dict(exercise=key, title=title, points=0, max_points=points)
        mine = [
            (c.get("name"), "hidden" in (c.get("classname") or ""), _outcome(c))
            for c in cases
            if _exercise_of(c.get("name", "")) == key
        ]
        bad = [m for m in mine if m[2][0] not in ("passed", "skipped")]
        if mine and not bad:
            rows.append({**row, "points": points, "status": "passed", "message": ""})
        elif bad:
            name, hidden, (status, message) = bad[0]
            rows.append({**row, "status": status, "message": f"{'hidden ' if hidden else ''}test {name}: {message}"})
        elif broken:
            rows.append(
                {
                    **row,
                    "status": "error",
                    "message": f"the tests could not import your file: {_error_summary(broken[0])}",
                }
            )
        else:
            rows.append(
                {
                    **row,
                    "status": "timeout" if stopped and stopped.startswith("timeout") else "error",
                    "message": f"not graded: pytest did not finish ({stopped or 'no results'})",
                }
            )
    return rows


def run_pytest(student_file: Path, workdir: Path, timeout: float, test_timeout: float) -> list[dict]:
    """Copy the student's file next to the instructor's tests (visible and hidden) in `workdir` and run them."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / FILENAME).write_bytes(student_file.read_bytes())
    for path in (VISIBLE_TESTS, HIDDEN_TESTS, CONFTEST):
        (workdir / path.name).write_text(path.read_text())
    (workdir / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    junit = workdir / "junit.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:xdist",
        "-c",
        str(workdir / "pytest.ini"),
        "--rootdir",
        str(workdir),
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",
        VISIBLE_TESTS.name,
        HIDDEN_TESTS.name,
    ]
    env = {**os.environ, "CLASSROOM_TEST_TIMEOUT": str(int(test_timeout))}
    try:
        run = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return junit_results(None, f"timeout: the tests ran past {timeout:g} s")
    (workdir / "pytest.log").write_text(run.stdout + run.stderr)
    return junit_results(junit, None if junit.exists() else f"pytest exited with code {run.returncode}")
