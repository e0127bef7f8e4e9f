"""Build the course's website: a static site of the committed notebooks, with their outputs (nothing is executed).

The front page is the README, every notebook is a page, grouped by part (site/parts.yml), and the claims report
(results/CLAIMS.md) closes the site when it exists. The table of contents is made from the notebooks present, so a new
notebook appears without editing anything. Jupyter Book 1 (Sphinx, myst-nb) builds it, offline; MathJax is served
from the site, so the pages need no network either.

Usage: python scripts/build_site.py [--out _build/site] [--strict] [-j N]   (make site)
The sources are assembled in a work folder (_build/site-src), never in the repository's tree.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE_CONFIG = ROOT / "site"
NOTEBOOK_NAME = re.compile(r"^(\d+)_.+\.ipynb$")
HEAVY = ("*.safetensors", "*.pt", "*.pth", "*.ckpt", "*.npz", "*.tar", "*.zip")  # never pages of the site
MAX_CLAIMS_FILES, MAX_CLAIMS_BYTES = 2000, 200_000_000


class SiteError(RuntimeError):
    """A problem with the course's files or the tools, told in words that say what to do."""


@dataclass(frozen=True)
class Part:
    title: str
    first: int  # the lowest notebook number that falls into this part by default


def load_parts(path: Path = SITE_CONFIG / "parts.yml") -> tuple[list[Part], str]:
    """The parts of site/parts.yml, in order, and the caption of the results section."""
    config = yaml.safe_load(path.read_text())
    parts = [Part(str(p["title"]), int(p["from"])) for p in config["parts"]]
    firsts = [p.first for p in parts]
    if not parts or firsts != sorted(set(firsts)):
        raise SiteError(f"{path}: the parts' `from` numbers must rise strictly, got {firsts}")
    return parts, str(config.get("results_caption", "Results"))


def course_notebooks(folder: Path) -> list[Path]:
    """notebooks/NN_*.ipynb, sorted by their number."""
    found = [p for p in folder.glob("*.ipynb") if NOTEBOOK_NAME.match(p.name)]
    numbers = [int(NOTEBOOK_NAME.match(p.name).group(1)) for p in found]
    if len(set(numbers)) != len(numbers):
        raise SiteError(f"two notebooks share a number in {folder}: {sorted(p.name for p in found)}")
    return sorted(found, key=lambda p: int(NOTEBOOK_NAME.match(p.name).group(1)))


def part_of(notebook: Path, parts: list[Part]) -> int:
    """The index in `parts` of the notebook's part: its metadata course.part (number from 1, or title), else by
    number."""
    declared = json.loads(notebook.read_text()).get("metadata", {}).get("course", {}).get("part")
    if declared is not None:
        titles = [p.title for p in parts]
        if isinstance(declared, int) and 1 <= declared <= len(parts):
            return declared - 1
        if isinstance(declared, str) and declared in titles:
            return titles.index(declared)
        raise SiteError(
            f"{notebook.name}: metadata course.part = {declared!r} names no part; use a number from 1 to "
            f"{len(parts)} or one of {titles} (site/parts.yml)"
        )
    number = int(NOTEBOOK_NAME.match(notebook.name).group(1))
    candidates = [i for i, p in enumerate(parts) if p.first <= number]
    if not candidates:
        raise SiteError(f"{notebook.name}: no part starts at or below {number} in site/parts.yml")
    return candidates[-1]


def table_of_contents(notebooks: list[Path], parts: list[Part], claims: bool, results_caption: str) -> dict:
    """The Jupyter Book 1 _toc.yml: the README as the root, a section per part, then the claims and the glossary."""
    chapters: list[list[dict]] = [[] for _ in parts]
    for nb in notebooks:
        chapters[part_of(nb, parts)].append({"file": f"notebooks/{nb.stem}"})
    toc_parts = [{"caption": p.title, "chapters": c} for p, c in zip(parts, chapters) if c]
    reference = [{"file": "results/CLAIMS"}] if claims else []
    toc_parts.append({"caption": results_caption, "chapters": reference + [{"file": "glossary"}]})  # the terms used
    return {"format": "jb-book", "root": "index", "parts": toc_parts}


def stage(work: Path, notebooks: list[Path], readme: Path, claims: Path | None) -> dict:
    """Assemble the book's sources in `work`: config, toc, README as index.md, notebooks, claims report."""
    if work.exists():
        if any(work.iterdir()) and not (work / "_toc.yml").exists():
            raise SiteError(f"{work} is not empty and holds no earlier website sources: choose another --work")
        shutil.rmtree(work)
    (work / "notebooks").mkdir(parents=True)
    shutil.copy2(SITE_CONFIG / "_config.yml", work / "_config.yml")
    shutil.copytree(SITE_CONFIG / "_ext", work / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(readme, work / "index.md")
    shutil.copy2(SITE_CONFIG / "glossary.md", work / "glossary.md")
    for nb in notebooks:
        shutil.copy2(nb, work / "notebooks" / nb.name)
    if claims is not None:  # with its folder: the figures and tables it shows or includes (checkpoints left out)
        ignore = shutil.ignore_patterns(*HEAVY, "__pycache__", ".*")
        files = [
            p
            for p in claims.parent.rglob("*")
            if p.is_file()
            and not ignore(str(p.parent), [p.name])
            and not any(part.startswith(".") for part in p.relative_to(claims.parent).parts)
        ]
        size = sum(p.stat().st_size for p in files)
        if len(files) > MAX_CLAIMS_FILES or size > MAX_CLAIMS_BYTES:
            raise SiteError(
                f"the claims report's folder {claims.parent} holds {len(files)} files, {size / 1e6:.0f} MB: "
                f"keep CLAIMS.md in a folder of its own (results/) with what it shows"
            )
        shutil.copytree(claims.parent, work / "results", ignore=ignore)
        shutil.copy2(claims, work / "results" / "CLAIMS.md")
    parts, caption = load_parts()
    toc = table_of_contents(notebooks, parts, claims is not None, caption)
    (work / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False, allow_unicode=True))
    return toc


def tool(name: str) -> str:
    """A console script of this environment (next to this Python), else from PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise SiteError(
            f"{name} not found: install the website's packages with `pip install -e '.[docs]'` "
            f"(or run `make site`, which does it)"
        )
    return found


def build(work: Path, out: Path, jobs: str = "1") -> list[str]:
    """Sphinx's HTML build of the staged book into `out`; returns Sphinx's warnings (lines)."""
    if out.exists():
        if any(out.iterdir()) and not (out / ".buildinfo").exists():
            raise SiteError(f"{out} is not empty and holds no earlier website: choose another --out")
        shutil.rmtree(out)
    made = subprocess.run([tool("jupyter-book"), "config", "sphinx", str(work)], capture_output=True, text=True)
    if made.returncode:
        raise SiteError(f"jupyter-book could not write the Sphinx configuration:\n{made.stdout}{made.stderr}")
    with open(work / "conf.py", "a") as conf:  # `jupyter-book build` puts local extensions on sys.path; conf.py must
        conf.write("\nimport os, sys\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))\n")
    warnings_file = work / "sphinx-warnings.log"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-q",
            "-j",
            jobs,
            "-d",
            str(work / ".doctrees"),
            "-w",
            str(warnings_file),
            "--keep-going",
            str(work),
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    warnings = (
        [line for line in warnings_file.read_text().splitlines() if line.strip()] if warnings_file.exists() else []
    )
    if run.returncode:
        raise SiteError(f"Sphinx failed (exit {run.returncode}):\n{run.stdout[-4000:]}{run.stderr[-4000:]}")
    return warnings


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "site", help="the website (default _build/site)")
    ap.add_argument("--work", type=Path, default=None, help="where the sources are assembled (default: OUT-src)")
    ap.add_argument("--notebooks", type=Path, default=ROOT / "notebooks", help="folder of the NN_*.ipynb notebooks")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the front page")
    ap.add_argument(
        "--claims",
        type=Path,
        default=ROOT / "results" / "CLAIMS.md",
        help="the claims report, a page when the file exists (default results/CLAIMS.md)",
    )
    ap.add_argument("-j", "--jobs", default="1", help="Sphinx processes (a number or 'auto'; default 1)")
    ap.add_argument("--strict", action="store_true", help="fail on any Sphinx warning")
    args = ap.parse_args(argv)

    out = args.out.resolve()
    work = (args.work or out.with_name(out.name + "-src")).resolve()
    try:
        notebooks = course_notebooks(args.notebooks)
        if not notebooks:
            raise SiteError(f"no notebooks NN_*.ipynb in {args.notebooks}")
        if not args.readme.is_file():
            raise SiteError(f"the front page {args.readme} does not exist")
        claims = args.claims if args.claims.is_file() else None
        started = time.perf_counter()
        toc = stage(work, notebooks, args.readme, claims)
        warnings = build(work, out, args.jobs)
        seconds = time.perf_counter() - started
    except SiteError as err:
        print(f"build_site: {err}", file=sys.stderr)
        return 2
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    for part in toc["parts"]:
        print(f"{part['caption']}: {', '.join(Path(c['file']).name for c in part['chapters'])}")
    if claims is None:
        print(f"(no claims report yet: {args.claims} appears once the experiment notebooks have written their results)")
    pages = len(list(out.rglob("*.html")))
    print(
        f"website built in {seconds:.0f} s: {pages} pages, {folder_size(out) / 1e6:.1f} MB, "
        f"{len(warnings)} warning(s)\nopen {(out / 'index.html').as_uri()}"
    )
    return 1 if args.strict and warnings else 0


if __name__ == "__main__":
    sys.exit(main())
