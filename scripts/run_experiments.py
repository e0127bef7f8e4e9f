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
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT))

from course.claims import CLAIMS, SCALES, report  # noqa: E402
from course.notebook import declared_parameters  # noqa: E402
from course.parallel import START_VARIABLE, STARTS, check_jobs, default_jobs  # noqa: E402

EXPERIMENTS = sorted({c["notebook"] for c in CLAIMS.values()})


def has_parameter(name: str, parameter: str) -> bool:
    """Whether the notebook's parameters cell declares `parameter`."""
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    return bool(cells) and parameter in declared_parameters("".join(cells[0]["source"]))


def run_one(name: str, scale: str, runs: Path, threads: int, jobs: int, start: str | None) -> tuple[str, float, int]:
    out = ROOT / "results" / SCALES[scale] / name
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
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
    with open(runs / f"{name}.log", "w") as log:
        code = subprocess.run(cmd, cwd=NOTEBOOKS, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return name, time.perf_counter() - started, code


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
    runs = ROOT / "runs" / f"experiments-{args.scale}-{datetime.now():%Y%m%d-%H%M%S}"
    runs.mkdir(parents=True)
    print(
        f"{len(names)} notebook(s) at scale {args.scale}, {args.notebooks} at a time, {args.jobs} runs side by side "
        f"inside each; executed copies in {runs}"
    )
    failed = []
    with ThreadPoolExecutor(args.notebooks) as pool:
        for name, seconds, code in pool.map(
            lambda n: run_one(n, args.scale, runs, args.threads, args.jobs, args.start), names
        ):
            print(
                f"  {name:32s} {seconds / 60:6.1f} min{'  FAILED (see ' + str(runs / name) + '.log)' if code else ''}"
            )
            failed += [name] if code else []
    report(ROOT / "results")
    print((ROOT / "results" / "CLAIMS.md").read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
