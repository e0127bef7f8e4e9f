"""The course's website (scripts/build_site.py, make site): its table of contents, then one real build of the committed
notebooks, checked page by page, and opened in headless Chromium to see the maths typeset with nothing from the
network."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import chromium, require_chromium

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
build_site = importlib.util.module_from_spec(spec)
sys.modules["build_site"] = build_site  # its dataclasses look their module up
spec.loader.exec_module(build_site)

CLAIMS = """# The paper's claims, measured

| claim | paper | ours | verdict |
|---|---|---|---|
| ViT overfits small data more than a ResNet (Fig. 3) | §4.3 | 3 seeds | holds-in-miniature |

![error bars](figures/claims.png)

```{csv-table} Measured, from a table file of its own
:file: claims.csv
:header-rows: 1
```
"""


def notebook(folder: Path, name: str, part=None) -> Path:
    metadata = {"kernelspec": {"name": "python3"}}
    if part is not None:
        metadata["course"] = {"part": part}
    path = folder / name
    path.write_text(json.dumps({"cells": [], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}))
    return path


# ---------------------------------------------------------------- the table of contents, without building


def test_parts_follow_the_numbers_unless_a_notebook_names_its_part(tmp_path):
    parts, caption = build_site.load_parts()
    for name in ("00_a.ipynb", "06_b.ipynb", "07_c.ipynb", "14_d.ipynb", "16_e.ipynb", "17_f.ipynb", "21_new.ipynb"):
        notebook(tmp_path, name)
    notebook(tmp_path, "18_primer.ipynb", part=1)
    notebook(tmp_path, "19_appendix.ipynb", part=parts[2].title)
    found = build_site.course_notebooks(tmp_path)
    toc = build_site.table_of_contents(found, parts, claims=False, results_caption=caption)
    chapters = {p["caption"]: [Path(c["file"]).name for c in p["chapters"]] for p in toc["parts"]}
    assert toc["root"] == "index"
    assert list(chapters) == [p.title for p in parts] + [caption]  # the last: the glossary (and claims, if any)
    assert chapters[parts[0].title] == ["00_a", "06_b", "18_primer"]
    assert chapters[parts[1].title] == ["07_c"]
    assert chapters[parts[2].title] == ["14_d", "19_appendix"]
    assert chapters[parts[3].title] == ["16_e"]
    assert chapters[parts[4].title] == ["17_f"]
    assert chapters[parts[-1].title] == ["21_new"]  # a new notebook joins the last part by default


def test_the_course_parts_as_the_readme_lists_them():
    parts, _ = build_site.load_parts()
    toc = build_site.table_of_contents(build_site.course_notebooks(ROOT / "notebooks"), parts, False, "Results")
    where = {
        Path(c["file"]).name[:2]: p["caption"] for p in toc["parts"] for c in p["chapters"] if c["file"] != "glossary"
    }
    assert sorted(where) == [p.name[:2] for p in NOTEBOOKS]
    assert {where[n] for n in ("00", "06")} == {"Part 1: Building ViT by hand"}
    assert {where[n] for n in ("07", "08", "13")} == {"Part 2: The paper's experiments in miniature"}
    assert {where[n] for n in ("14", "15")} == {"Part 3: Looking inside, learning without labels"}
    assert where["16"] == "Part 4: Pre-training for real"
    assert {where[n] for n in ("17", "18", "19") if n in where} <= {"Part 5: Around the paper"}
    assert where.get("20", "Appendix") == "Appendix"


def test_claims_page_only_when_the_report_exists(tmp_path):
    parts, caption = build_site.load_parts()
    nbs = [notebook(tmp_path, "00_a.ipynb")]
    without = build_site.table_of_contents(nbs, parts, claims=False, results_caption=caption)
    assert "results/CLAIMS" not in json.dumps(without)
    assert without["parts"][-1] == {"caption": caption, "chapters": [{"file": "glossary"}]}
    with_claims = build_site.table_of_contents(nbs, parts, claims=True, results_caption=caption)
    assert with_claims["parts"][-1] == {
        "caption": caption,
        "chapters": [{"file": "results/CLAIMS"}, {"file": "glossary"}],
    }


def test_bad_input_is_told(tmp_path, capsys):
    notebook(tmp_path, "03_x.ipynb", part=9)
    with pytest.raises(build_site.SiteError, match="names no part"):
        build_site.part_of(tmp_path / "03_x.ipynb", build_site.load_parts()[0])
    notebook(tmp_path, "03_y.ipynb")
    with pytest.raises(build_site.SiteError, match="share a number"):
        build_site.course_notebooks(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build_site.main(["--notebooks", str(empty), "--out", str(tmp_path / "site")]) == 2
    assert "no notebooks" in capsys.readouterr().err
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("not a website")
    with pytest.raises(build_site.SiteError, match="not empty"):
        build_site.build(tmp_path, occupied)
    with pytest.raises(build_site.SiteError, match="not empty"):
        build_site.stage(occupied, [], ROOT / "README.md", None)
    assert (occupied / "mine.txt").exists()


def test_a_claims_report_in_a_crowded_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(build_site, "MAX_CLAIMS_FILES", 3)
    for i in range(4):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "CLAIMS.md").write_text(CLAIMS)
    with pytest.raises(build_site.SiteError, match="folder of its own"):
        build_site.stage(
            tmp_path / "work", [notebook(tmp_path, "00_a.ipynb")], ROOT / "README.md", tmp_path / "CLAIMS.md"
        )


# ---------------------------------------------------------------- one real build


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The website of the committed notebooks, built once, with a stand-in claims report (with a table and a figure)
    and the README plus a link to a notebook (the README's links to notebooks/... must work on the site)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tmp = tmp_path_factory.mktemp("site")
    (tmp / "results" / "figures").mkdir(parents=True)
    (tmp / "results" / "CLAIMS.md").write_text(CLAIMS)
    plt.imsave(tmp / "results" / "figures" / "claims.png", [[0.0, 1.0], [1.0, 0.0]])
    (tmp / "results" / "claims.csv").write_text("claim,seeds,gap\nViT vs ResNet at 1% data,3,-0.071 ± 0.012\n")
    (tmp / "results" / "model.safetensors").write_bytes(b"0" * 1000)  # a checkpoint: not published
    (tmp / "results" / "README.md").write_text("# Measured results\n\nNot a page of the site.\n")  # as in results/
    readme = tmp / "README.md"
    readme.write_text((ROOT / "README.md").read_text() + "\nStart with [the patches](notebooks/01_patches.ipynb).\n")
    out = tmp / "site"
    started = time.perf_counter()
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "build_site.py"),
            "--out",
            str(out),
            "--claims",
            str(tmp / "results" / "CLAIMS.md"),
            "--readme",
            str(readme),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    seconds = time.perf_counter() - started
    assert run.returncode == 0, f"the website did not build:\n{run.stdout}\n{run.stderr}"
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"website built in {seconds:.0f} s, {size / 1e6:.1f} MB")
    return {"out": out, "stdout": run.stdout, "stderr": run.stderr, "seconds": seconds}


def page(site, rel: str) -> str:
    path = site["out"] / rel
    assert path.is_file(), f"no page {rel}"
    return path.read_text()


def test_builds_without_warnings(site):
    warnings = [line for line in site["stderr"].splitlines() if line.startswith("warning:")]
    assert not warnings, "Sphinx warned:\n" + "\n".join(warnings)


def test_every_notebook_has_a_page_under_its_part(site):
    index = page(site, "index.html")
    captions = [
        (m.start(), html.unescape(m.group(1))) for m in re.finditer(r'<span class="caption-text">(.*?)</span>', index)
    ]
    parts, results_caption = build_site.load_parts()
    assert [c for _, c in captions] == [p.title for p in parts] + [results_caption]
    for nb in NOTEBOOKS:
        title = next(
            line[2:].strip()
            for c in json.loads(nb.read_text())["cells"]
            if c["cell_type"] == "markdown"
            for line in "".join(c["source"]).splitlines()
            if line.startswith("# ")
        )
        body = page(site, f"notebooks/{nb.stem}.html")
        assert html.escape(title, quote=False) in body or title in html.unescape(body), f"{nb.name}: title missing"
        link = index.find(f'href="notebooks/{nb.stem}.html"', captions[0][0])  # in the navigation (after <head>)
        assert link > 0, f"{nb.name} is not in the navigation"
        part = build_site.part_of(nb, parts)
        before = [c for pos, c in captions if pos < link]
        assert before[-1] == parts[part].title, f"{nb.name} is listed under {before[-1]!r}"


def test_outputs_are_shown_not_rerun(site):
    body = page(site, "notebooks/01_patches.html")
    committed = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    check = next(c for c in committed["cells"] if "".join(c["source"]).startswith("# NBVAL_CHECK_OUTPUT"))
    first_line = "".join(check["outputs"][0]["text"]).splitlines()[0]
    assert html.escape(first_line, quote=False) in body
    figures = sum(1 for c in committed["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    assert len(re.findall(r'<img[^>]+src="\.\./_images/', body)) == figures


def test_readme_is_the_front_page_and_its_notebook_links_work(site):
    index = page(site, "index.html")
    title = next(line[2:] for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("# "))
    assert f"<h1>{html.escape(title, quote=False)}" in index
    assert re.search(r'<a class="reference internal" href="notebooks/01_patches.html">', index)


def test_claims_report_is_a_page_with_its_table_and_figure(site):
    body = page(site, "results/CLAIMS.html")
    assert "<table" in body and "holds-in-miniature" in body
    assert re.search(r'<img[^>]+src="\.\./_images/claims[^"]*\.png"', body)
    assert any((site["out"] / "_images").glob("claims*.png"))
    assert "-0.071 ± 0.012" in body  # the table included from claims.csv
    assert not list(site["out"].rglob("*.safetensors"))


def test_the_glossary_is_a_page_that_names_the_terms(site):
    body = html.unescape(page(site, "glossary.html"))
    for term in ("SE, standard error", "TOST, margin", "correction", "MFU", "[class] token", "Inductive bias"):
        assert term in body, f"the glossary lacks {term}"
    assert 'href="glossary.html"' in page(site, "index.html")  # in the navigation


def test_maths_served_from_the_site(site):
    body = page(site, "notebooks/04_encoder.html")
    assert re.search(r'<script[^>]+src="\.\./_static/mathjax/tex-chtml\.js"', body)
    assert (site["out"] / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert (site["out"] / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    assert body.count('class="math notranslate nohighlight"') > 10


REMOTE_IN_HTML = re.compile(
    r'<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc=["\'](?:https?:)?//'
    r'|<link\b[^>]*\bhref=["\'](?:https?:)?//',
    re.I,
)
REMOTE_IN_CSS = re.compile(r'url\(\s*["\']?(?:https?:)?//|@import\s+["\']?(?:url\()?["\']?(?:https?:)?//', re.I)


def remote_resources(folder: Path) -> list[str]:
    """Scripts, styles, fonts, images or frames that the pages of `folder` would load from another host."""
    found = []
    for path in folder.rglob("*.html"):
        for tag in re.findall(r"<(?:script|link|img|iframe|source|audio|video)\b[^>]*>", path.read_text()):
            if REMOTE_IN_HTML.search(tag):
                found.append(f"{path.relative_to(folder)}: {tag}")
    for path in folder.rglob("*.css"):
        found += [f"{path.relative_to(folder)}: {m.group(0)}" for m in REMOTE_IN_CSS.finditer(path.read_text())]
    return found


def test_remote_resources_are_found(tmp_path):
    (tmp_path / "a.html").write_text(
        '<a href="https://arxiv.org/abs/2010.11929">paper</a><script src="_static/x.js">'
        '<script defer src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js">'
        '<link rel="stylesheet" href="//fonts.googleapis.com/css?family=Lato">'
    )
    (tmp_path / "b.css").write_text(
        "@import url('https://fonts.googleapis.com/css2?family=Inter'); a { background: url(img/local.png) }"
    )
    assert len(remote_resources(tmp_path)) == 3


def test_no_page_loads_anything_from_the_network(site):
    found = remote_resources(site["out"])
    assert not found, "remote resources:\n" + "\n".join(found[:20])


@pytest.mark.browser
def test_pages_in_chromium_typeset_maths_offline(site):
    """Opened from disk in Chromium with every request outside the site refused: MathJax typesets the maths."""
    require_chromium()
    shots = ROOT / "_build" / "test-browser"
    shots.mkdir(parents=True, exist_ok=True)
    out_uri = site["out"].as_uri()
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        outside = []

        def guard(route):
            url = route.request.url
            if url.startswith((out_uri + "/", "data:", "blob:")):
                route.continue_()
            else:
                outside.append(url)
                route.abort()

        context.route("**/*", guard)
        pg = context.new_page()
        for rel in ("index.html", "notebooks/04_encoder.html"):
            pg.goto((site["out"] / rel).as_uri())
            pg.wait_for_function("window.MathJax?.startup?.promise !== undefined", timeout=30_000)
            pg.evaluate("() => MathJax.startup.promise")
        typeset = pg.locator("mjx-container").count()
        errors = pg.locator("mjx-merror").count()
        pg.evaluate(
            "() => document.querySelector('main mjx-container[display=\"true\"]')?.scrollIntoView({block: 'center'})"
        )
        pg.screenshot(path=shots / "site_04_encoder.png")
        context.close()
    print(f"screenshot: {shots / 'site_04_encoder.png'}")
    assert not outside, f"requests outside the site: {outside}"
    assert typeset > 10, f"MathJax typeset {typeset} formulas"
    assert errors == 0, f"{errors} formulas failed to typeset"
