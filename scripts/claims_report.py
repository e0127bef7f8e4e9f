"""results/claims.json and results/CLAIMS.md from the experiment notebooks' results (results/quick, results/reference,
results/gpu): every claim of the paper the course tests, beside what each scale found. Prints the table.

    python scripts/claims_report.py [--results results]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course.claims import report  # noqa: E402
from vitlib.utils import command_line  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(Path(__file__).resolve().parent.parent / "results"))
    args = ap.parse_args()
    if not Path(args.results).is_dir():
        print(f"no results folder at {args.results}: run the experiment notebooks first", file=sys.stderr)
        return 2
    report(args.results)
    print((Path(args.results) / "CLAIMS.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(command_line(main))
