"""The course's main job: run every notebook in order through papermill with its default parameters.

Executed copies go to a run folder (runs/course-<time>/ by default), never over the sources. While a notebook runs, a
progress bar counts its cells (on a terminal); at the end the script prints the time of each notebook, where the
executed copies are, the claims table (results/CLAIMS.md, once the experiment notebooks have written it) and where the
course's website is (make site).
Usage: python scripts/run_course.py [--only 01 03] [--out DIR] [-p NAME VALUE ...] (parameters are passed to every
notebook that declares them).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path

import papermill as pm

from vitlib.utils import command_line

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CLAIMS = ROOT / "results" / "CLAIMS.md"
SITE_INDEX = ROOT / "_build" / "site" / "index.html"


def kernel_config():
    """The kernel talks to papermill over CurveZMQ when its kernelspec says it can (ipykernel does): otherwise every
    kernel warns on start that it runs over TCP without encryption."""
    import zmq
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": "auto" if zmq.has("curve") else "disabled"}})


def progress_bar(name: str) -> dict:
    """papermill's bar over the notebook's cells, with the notebook's name; on a terminal only (disable=None), and
    replaced by the notebook's line when it is done (leave=False)."""
    return {
        "desc": name,
        "unit": "cell",
        "leave": False,
        "disable": None,
        "dynamic_ncols": True,
        "bar_format": "  {desc}: {n_fmt}/{total_fmt} cells |{bar}| {elapsed}<{remaining}",
    }


def claims_tables(text: str) -> str:
    """The Markdown tables of the claims report (its rows, in order); the whole report when it has no table."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            current.append(line.strip())
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return "\n\n".join("\n".join(b) for b in blocks) if blocks else text.strip()


def summary(
    times: list[tuple[str, float]],
    out: Path,
    failed: tuple[str, object] | None,
    not_run: list[str],
    claims: Path = CLAIMS,
    site_index: Path = SITE_INDEX,
) -> str:
    """What the course found, for the end of `make course`."""
    width = max([len(name) for name, _ in times] + [len(n) for n in not_run] + [8])
    lines = ["", f"{'notebook':{width}s}  time"]
    for name, seconds in times:
        mark = "  FAILED" if failed and name == failed[0] else ""
        lines.append(f"{name:{width}s}  {format_time(seconds)}{mark}")
    lines += [f"{name:{width}s}  not run" for name in not_run]
    lines.append(f"{'total':{width}s}  {format_time(sum(t for _, t in times))}")
    lines += ["", f"Executed notebooks: {rel(out)}/ (to open them: .venv/bin/jupyter lab {rel(out)})"]
    if claims.is_file():
        lines += ["", f"The paper's claims ({rel(claims)}):", "", claims_tables(claims.read_text())]
    else:
        lines += [
            "",
            f"The claims table ({rel(claims)}) is not there yet: it appears once the experiment notebooks "
            "have written their results.",
        ]
    if site_index.is_file():
        lines += ["", f"The course's website: {site_index.as_uri()} (rebuild it with `make site`)"]
    else:
        lines += [
            "",
            f"The course's website: `make site` builds it from the committed notebooks into "
            f"{rel(site_index.parent)}/ (then open {rel(site_index)})",
        ]
    return "\n".join(lines)


def format_time(seconds: float) -> str:
    return f"{seconds:7.1f} s" if seconds < 120 else f"{seconds / 60:7.1f} min"


def rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help=argparse.SUPPRESS)  # the tests' small course
    args = ap.parse_args(argv)

    notebooks = sorted(p for p in args.notebooks.glob("[0-9]*.ipynb"))
    if args.only:
        notebooks = [p for p in notebooks if p.name.startswith(tuple(args.only))]
    if not notebooks:
        print(f"no notebooks matched {args.only} in {args.notebooks}", file=sys.stderr)
        return 2
    import yaml

    given = {name: yaml.safe_load(value) for name, value in args.p}
    declared = {nb: pm.inspect_notebook(str(nb)) for nb in notebooks}
    unknown = sorted(set(given) - {name for names in declared.values() for name in names})
    if unknown:
        print(
            f"-p {', '.join(unknown)}: no selected notebook declares such a parameter (check the spelling in the "
            f"notebooks' parameters cells); nothing was run.",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out) if args.out else ROOT / "runs" / f"course-{datetime.now():%Y%m%d-%H%M%S}"
    out.mkdir(parents=True, exist_ok=True)
    config = kernel_config()
    print(f"running {len(notebooks)} notebook(s) into {rel(out)}", flush=True)
    times, failed = [], None
    for nb in notebooks:
        params = {k: v for k, v in given.items() if k in declared[nb]}
        start = time.perf_counter()
        try:
            pm.execute_notebook(
                str(nb),
                str(out / nb.name),
                parameters=params,
                cwd=str(args.notebooks),
                kernel_name=args.kernel,
                progress_bar=progress_bar(nb.name),
                config=config,
            )
        except pm.PapermillExecutionError as err:
            failed = (nb.name, err)
        times.append((nb.name, time.perf_counter() - start))
        print(f"  {nb.name:40s} {format_time(times[-1][1])}{'  FAILED' if failed else ''}", flush=True)
        if failed:
            break
    print(summary(times, out, failed, [p.name for p in notebooks[len(times) :]]), flush=True)
    if failed:
        print(
            f"\n{failed[0]} failed: {failed[1].ename}: {failed[1].evalue}\n(see {rel(out / failed[0])})",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(command_line(main))
