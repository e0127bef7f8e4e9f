"""The course's main job: run every notebook in order through papermill with its default parameters.

Executed copies go to a run folder (runs/course-<time>/ by default), never over the sources; the script prints
where they are and how long each notebook took. Usage: python scripts/run_course.py [--only 01 03] [--out DIR]
[-p NAME VALUE ...] (parameters are passed to every notebook that declares them).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path

import papermill as pm

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=None, help="run only notebooks whose name starts with one of these")
    ap.add_argument("--out", default=None, help="run folder (default runs/course-<date-time>)")
    ap.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="a parameter for every notebook that declares it (value parsed as YAML: 3, 0.1, true, text)",
    )
    ap.add_argument("--kernel", default="python3", help="Jupyter kernel (default: python3 of this environment)")
    args = ap.parse_args()

    notebooks = sorted(p for p in NOTEBOOKS.glob("[0-9]*.ipynb"))
    if args.only:
        notebooks = [p for p in notebooks if p.name.startswith(tuple(args.only))]
    if not notebooks:
        print(f"no notebooks matched {args.only} in {NOTEBOOKS}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else ROOT / "runs" / f"course-{datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    import yaml

    given = {name: yaml.safe_load(value) for name, value in args.p}
    print(f"running {len(notebooks)} notebook(s) into {out}")
    times, failed = [], None
    for nb in notebooks:
        declared = pm.inspect_notebook(str(nb))
        params = {k: v for k, v in given.items() if k in declared}
        start = time.perf_counter()
        try:
            pm.execute_notebook(
                str(nb),
                str(out / nb.name),
                parameters=params,
                cwd=str(NOTEBOOKS),
                kernel_name=args.kernel,
                progress_bar=False,
            )
        except pm.PapermillExecutionError as err:
            failed = (nb.name, err)
        times.append((nb.name, time.perf_counter() - start))
        print(f"  {nb.name:40s} {times[-1][1]:7.1f} s{'  FAILED' if failed else ''}", flush=True)
        if failed:
            break
    print(f"total {sum(t for _, t in times):.1f} s; executed notebooks in {out}")
    if failed:
        print(f"{failed[0]} failed: {failed[1].ename}: {failed[1].evalue}\n(see {out / failed[0]})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
