"""Run the experiment notebooks (08-19: those that judge a claim of course.paper_claims) at one scale and write
what they found under results/, then the claims report.

    python scripts/run_experiments.py --scale reference            # every experiment notebook, 7-84 min each, 2 cores
    python scripts/run_experiments.py --scale quick --only 08 09   # the quick presets of two notebooks
    python scripts/run_experiments.py --scale full                 # on a GPU: the full presets, into results/gpu

Each notebook runs with `-p preset <scale> -p out ../results/<folder>/<notebook>` (folder: quick, reference or gpu)
and, when its parameters cell has `jobs`, `-p jobs <--jobs>`: its sweep's runs go --jobs at a time side by side
(worker processes of one PyTorch thread each, course.parallel; the numbers are the same as one after
another). --notebooks notebooks run at a time (default 1), each with --threads PyTorch threads outside its workers;
the executed copies go to runs/experiments-<scale>-<date-time>/. Then results/claims.json and results/CLAIMS.md are
made again from everything under results/.

    python scripts/run_experiments.py --scale quick --jobs 8        # 8 runs side by side inside each notebook
    python scripts/run_experiments.py --scale full --start forkserver   # on a GPU: workers that start afresh

--start sets VITLIB_START for the notebooks: how their sweeps' workers start (course.parallel; fork unless
given).

A notebook writes its results into the run's folder first (runs/experiments-.../results/<folder>/<notebook>); they
replace the committed ones under results/ only when the notebook has finished. A stopped or failed run leaves results/
as it was; `--resume runs/experiments-...` carries it on: the notebooks that finished are not run again, and the others
reuse the runs their interrupted experiment saved (VITLIB_RESUME=1, course.experiments.Experiment).

    python scripts/run_experiments.py --scale quick --resume runs/experiments-quick-20261203-081500
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
RESULTS = ROOT / "results"
sys.path.insert(0, str(ROOT))

from course.claims import CLAIMS, SCALES, report  # noqa: E402
from course.experiments import RESUME_VARIABLE  # noqa: E402
from course.notebook import declared_parameters  # noqa: E402
from course.parallel import START_VARIABLE, STARTS, check_jobs, default_jobs  # noqa: E402
from vitlib.utils import command_line  # noqa: E402

EXPERIMENTS = sorted({c["notebook"] for c in CLAIMS.values()})


def has_parameter(name: str, parameter: str) -> bool:
    """Whether the notebook's parameters cell declares `parameter`."""
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    return bool(cells) and parameter in declared_parameters("".join(cells[0]["source"]))


def run_one(
    name: str, scale: str, runs: Path, threads: int, jobs: int, start: str | None, resume: bool = False
) -> tuple[str, float, int]:
    """Run one notebook into runs/results/<folder>/<name>; on success its results replace results/<folder>/<name>."""
    out = runs / "results" / SCALES[scale] / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT), RESUME_VARIABLE: str(int(resume))}
    if start:
        env[START_VARIABLE] = start
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        f"{name}.ipynb",
        str(runs / f"{name}.ipynb"),
        "--cwd",
        str(NOTEBOOKS),
        "-p",
        "preset",
        scale,
        "-p",
        "out",
        os.path.relpath(out, NOTEBOOKS),
        *(["-p", "jobs", str(jobs)] if has_parameter(name, "jobs") else []),
        "--no-progress-bar",
    ]
    with open(runs / f"{name}.log", "a" if resume else "w") as log:
        code = subprocess.run(cmd, cwd=NOTEBOOKS, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    if code == 0:
        publish(out, RESULTS / SCALES[scale] / name)
        (runs / f"{name}.done").touch()
    return name, time.perf_counter() - started, code


def publish(new: Path, committed: Path) -> None:
    """Replace the folder `committed` by a copy of `new`, so that at every moment one of the two is there whole."""
    staged, old = committed.with_name(f".{committed.name}.new"), committed.with_name(f".{committed.name}.old")
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(new, staged)
    shutil.rmtree(old, ignore_errors=True)
    if committed.exists():
        committed.rename(old)
    staged.rename(committed)
    shutil.rmtree(old, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=list(SCALES), required=True)
    ap.add_argument("--only", nargs="*", default=None, help="notebooks whose name starts with one of these")
    ap.add_argument(
        "--jobs",
        type=int,
        default=default_jobs(),
        help=f"runs side by side inside each notebook (worker processes, one thread each; default {default_jobs()}, "
        "one per core)",
    )
    ap.add_argument("--notebooks", type=int, default=1, help="notebooks at a time (default 1)")
    ap.add_argument("--start", choices=STARTS, default=None, help="how the sweeps' workers start (default: fork)")
    ap.add_argument("--threads", type=int, default=1, help="PyTorch threads per notebook, outside its workers")
    ap.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="RUNS",
        help="carry on an interrupted run from its folder runs/experiments-<scale>-<date-time>",
    )
    args = ap.parse_args()
    for option, value in (("--jobs", args.jobs), ("--notebooks", args.notebooks)):
        try:
            check_jobs(value)
        except ValueError:
            ap.error(f"{option} must be at least 1, got {value}")
    names = [n for n in EXPERIMENTS if not args.only or n.startswith(tuple(args.only))]
    if not names:
        print(f"no experiment notebook matches {args.only}; they are {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    if args.resume:
        runs = args.resume.resolve()
        if not (runs / "results").is_dir():
            ap.error(f"--resume {args.resume}: not the folder of an earlier run (it has no results/ folder)")
        done = [n for n in names if (runs / f"{n}.done").exists()]
        names = [n for n in names if n not in done]
        print(f"resuming {runs}: {len(done)} notebook(s) finished before, {len(names)} to run")
    else:
        runs = ROOT / "runs" / f"experiments-{args.scale}-{datetime.now():%Y%m%d-%H%M%S}"
        runs.mkdir(parents=True)
    print(
        f"{len(names)} notebook(s) at scale {args.scale}, {args.notebooks} at a time, {args.jobs} runs side by side "
        f"inside each; executed copies in {runs}"
    )
    failed = []
    try:
        with ThreadPoolExecutor(args.notebooks) as pool:
            for name, seconds, code in pool.map(
                lambda n: run_one(n, args.scale, runs, args.threads, args.jobs, args.start, bool(args.resume)), names
            ):
                note = f"  FAILED (see {runs / name}.log; results/ kept as it was)" if code else ""
                print(f"  {name:32s} {seconds / 60:6.1f} min{note}")
                failed += [name] if code else []
    except KeyboardInterrupt:
        print(
            f"stopped: results/ keeps what it held for the unfinished notebooks; carry on with "
            f"--resume {os.path.relpath(runs)}",
            file=sys.stderr,
        )
        return 130
    report(RESULTS)
    print((RESULTS / "CLAIMS.md").read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(command_line(main))
