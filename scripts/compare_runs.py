"""Does your re-run reproduce the committed one? Compare two runs of an experiment notebook, row by row and verdict
by verdict (course.replication).

    papermill notebooks/17_inductive_biases.ipynb /tmp/17.ipynb --cwd notebooks -p preset reference -p out /tmp/17
    python scripts/compare_runs.py results/reference/17_inductive_biases /tmp/17

COMMITTED and RERUN are two experiment files (JSON) or two folders of them (every file present in both is compared).
On the machine that made the committed run, every row is identical but for its timings; on another CPU, expect the
numbers to move (the report says by how much, per condition) and look at whether each verdict keeps its class.
--out writes the comparisons as JSON.
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course.replication import compare_runs, report  # noqa: E402
from vitlib.utils import write_json  # noqa: E402


def pairs(committed: Path, rerun: Path) -> list[tuple[Path, Path]]:
    for p in (committed, rerun):
        if not p.exists():
            raise SystemExit(f"{p} does not exist: give two experiment files (.json) or two folders of them.")
    if committed.is_file() and rerun.is_file():
        return [(committed, rerun)]
    if committed.is_dir() and rerun.is_dir():
        found = [(f, rerun / f.name) for f in sorted(committed.glob("*.json")) if (rerun / f.name).is_file()]
        if not found:
            raise SystemExit(
                f"no experiment file is in both {committed} and {rerun}: did the re-run write its results there "
                "(papermill ... -p out FOLDER)?"
            )
        return found
    raise SystemExit("give two files or two folders, not one of each.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("committed", type=Path, help="the committed run: an experiment JSON or its folder")
    ap.add_argument("rerun", type=Path, help="your re-run: an experiment JSON or its folder")
    ap.add_argument("--out", type=Path, help="write the comparisons to this JSON file")
    args = ap.parse_args(argv)
    comparisons = []
    for a, b in pairs(args.committed, args.rerun):
        try:
            comparisons.append(dict(compare_runs(a, b), committed_file=str(a), rerun_file=str(b)))
        except (ValueError, KeyError, json.JSONDecodeError) as err:
            raise SystemExit(f"cannot compare {a} with {b}: {err}") from None
        print(report(comparisons[-1]), end="\n\n")
    if args.out:
        write_json(args.out, {"comparisons": comparisons})
        print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
