"""A synthetic class to try the grader on: full, blank, partial and faulty submissions of some assignments.

    python scripts/synthetic_class.py OUT --students 20 --assignments 01_patches 03_attention vit_from_scratch
    python -m classroom grade OUT/submissions --out OUT/reports

Students cycle through: full (the instructor's files), blank (the released ones), partial (odd-numbered exercises
answered; the library: patchify and the patch embedding) and faulty (one fault each: broken JSON, an endless loop, an
exception, tampered check cells, a missing file, a library answer that fits only the visible tests). Prints the
expected points of each student and writes them to OUT/expected.json.
"""

import argparse
import json
import shutil
from pathlib import Path

import nbformat

from classroom import build_class, library, parse_exercises
from vitlib.utils import write_json

COURSE = Path(__file__).resolve().parent.parent / "notebooks"
FAULTS = ["broken-json", "endless-loop", "exception", "tampered-checks", "overfit-library", "missing-files"]


def first_exercise_cell(nb, instructor):
    key = parse_exercises(instructor)[0].key
    return next(c for c in nb.cells if c.get("id") == key)


def faulty(kind: str, folder: Path, base: Path, assignments: list[str]) -> None:
    """Start from the instructor's (full) files and break one thing."""
    shutil.copytree(base / "instructor", folder)
    notebooks = [a for a in assignments if a != library.ASSIGNMENT]
    first = folder / f"{notebooks[0]}.ipynb"
    if kind == "broken-json":
        first.write_text(first.read_text()[:5000])
    elif kind == "missing-files":
        for a in notebooks[1:] + [library.ASSIGNMENT]:
            (folder / (library.FILENAME if a == library.ASSIGNMENT else f"{a}.ipynb")).unlink(missing_ok=True)
    elif kind == "overfit-library" and library.ASSIGNMENT in assignments:
        src = library.SOURCE.read_text().replace("    p = patch_size\n", "    p = 4\n")
        (folder / library.FILENAME).write_text(src.replace("        h = self.heads\n", "        h = 2\n"))
    elif kind in ("endless-loop", "exception", "tampered-checks"):
        nb = nbformat.read(first, as_version=4)
        instructor = nbformat.read(COURSE / first.name, as_version=4)
        ex = parse_exercises(instructor)[0]
        solution = nb.cells[[c.get("id") for c in nb.cells].index(ex.key) + 1]  # the solution cell after it
        if kind == "endless-loop":
            solution.source = "while True:\n    pass"
        elif kind == "exception":
            solution.source = 'raise RuntimeError("something I did not expect")'
        else:
            for c in nb.cells:
                if "exercise-check" in c.metadata.get("tags", []):
                    c.source, c.metadata["tags"] = "print('all good')", []
            solution.source = "# my answer: none"
        nbformat.write(nb, first)


def faulty_points(kind: str, full: dict, assignments: list[str]) -> float:
    """What a faulty student must score: full marks less what the fault breaks."""
    first = [a for a in assignments if a != library.ASSIGNMENT][0]
    total = sum(full.values())
    if kind == "broken-json":
        return total - full[first]
    if kind == "missing-files":
        return full[first]
    if kind == "overfit-library":
        return total - full.get(library.ASSIGNMENT, 0)
    return total - parse_exercises(nbformat.read(COURSE / f"{first}.ipynb", as_version=4))[0].points


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--students", type=int, default=20)
    ap.add_argument("--assignments", nargs="+", default=["01_patches", "03_attention", library.ASSIGNMENT])
    args = ap.parse_args()
    out = Path(args.out)
    base = out / "base"
    expected = build_class(COURSE, base, args.assignments)
    subs = out / "submissions"
    kinds = ["full", "blank", "partial", "faulty", "faulty"]
    names = {"full": "instructor", "blank": "released", "partial": "partial"}
    plan = {}
    for i in range(args.students):
        kind = kinds[i % len(kinds)]
        name = f"s{i + 1:02d}-{kind}"
        if kind == "faulty":
            fault = FAULTS[(i // len(kinds) * 2 + i % len(kinds) - 3) % len(FAULTS)]
            name += "-" + fault
            faulty(fault, subs / name, base / "submissions", args.assignments)
            plan[name] = faulty_points(fault, expected["instructor"], args.assignments)
        else:
            shutil.copytree(base / "submissions" / names[kind], subs / name)
            plan[name] = sum(expected[names[kind]].values())
    write_json(out / "expected.json", plan)
    print(json.dumps(plan, indent=1))


if __name__ == "__main__":
    main()
