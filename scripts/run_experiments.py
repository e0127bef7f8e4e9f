"""Run the experiment notebooks (07-18: those that judge a claim of vitlib.studies.claims) at one scale and write
what they found under results/, then the claims report.

    python scripts/run_experiments.py --scale reference            # every experiment notebook, about 20 min each
    python scripts/run_experiments.py --scale quick --only 07 08   # the quick presets of two notebooks
    python scripts/run_experiments.py --scale full                 # on a GPU: the full presets, into results/gpu

Each notebook runs with `-p preset <scale> -p out ../results/<folder>/<notebook>` (folder: quick, reference or gpu),
one PyTorch thread per notebook and --jobs notebooks at a time; the executed copies go to runs/experiments-<scale>-
<date-time>/. Then results/claims.json and results/CLAIMS.md are made again from everything under results/.
"""

from __future__ import annotations

import argparse
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

from vitlib.studies.claims import CLAIMS, SCALES, report  # noqa: E402

EXPERIMENTS = sorted({c["notebook"] for c in CLAIMS.values()})


def run_one(name: str, scale: str, runs: Path, threads: int) -> tuple[str, float, int]:
    out = ROOT / "results" / SCALES[scale] / name
    start = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
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
        "--no-progress-bar",
    ]
    with open(runs / f"{name}.log", "w") as log:
        code = subprocess.run(cmd, cwd=NOTEBOOKS, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    return name, time.perf_counter() - start, code


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=list(SCALES), required=True)
    ap.add_argument("--only", nargs="*", default=None, help="notebooks whose name starts with one of these")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks at a time (default 2, one per core)")
    ap.add_argument("--threads", type=int, default=1, help="PyTorch threads per notebook")
    args = ap.parse_args()
    names = [n for n in EXPERIMENTS if not args.only or n.startswith(tuple(args.only))]
    if not names:
        print(f"no experiment notebook matches {args.only}; they are {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    runs = ROOT / "runs" / f"experiments-{args.scale}-{datetime.now():%Y%m%d-%H%M%S}"
    runs.mkdir(parents=True)
    print(f"{len(names)} notebook(s) at scale {args.scale}, {args.jobs} at a time; executed copies in {runs}")
    failed = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for name, seconds, code in pool.map(lambda n: run_one(n, args.scale, runs, args.threads), names):
            print(
                f"  {name:32s} {seconds / 60:6.1f} min{'  FAILED (see ' + str(runs / name) + '.log)' if code else ''}"
            )
            failed += [name] if code else []
    report(ROOT / "results")
    print((ROOT / "results" / "CLAIMS.md").read_text())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
