"""scripts/run_course.py (make course): a bar per notebook, no kernel warnings, and a closing summary that says what
the course found and where it is."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("run_course", ROOT / "scripts" / "run_course.py")
run_course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_course)


def small_notebook(path: Path, *sources: str) -> None:
    cells = [
        {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": s}
        for i, s in enumerate(sources)
    ]
    path.write_text(
        json.dumps(
            {
                "cells": cells,
                "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )


def test_summary_before_the_claims_and_the_website_exist(tmp_path):
    text = run_course.summary(
        [("01_a.ipynb", 12.5), ("02_b.ipynb", 300.0)],
        tmp_path / "runs" / "x",
        ("02_b.ipynb", None),
        ["03_c.ipynb"],
        claims=tmp_path / "CLAIMS.md",
        site_index=tmp_path / "_build" / "site" / "index.html",
    )
    assert re.search(r"^01_a\.ipynb +12\.5 s$", text, re.M)
    assert re.search(r"^02_b\.ipynb +5\.0 min  FAILED$", text, re.M)
    assert re.search(r"^03_c\.ipynb +not run$", text, re.M)
    assert re.search(r"^total +5\.2 min$", text, re.M)
    assert f"{tmp_path / 'runs' / 'x'}/" in text
    assert "is not there yet: it appears once the experiment notebooks have written their results" in text
    assert "`make site` builds it" in text and "index.html" in text


def test_summary_prints_the_claims_table_and_the_website(tmp_path):
    claims = tmp_path / "CLAIMS.md"
    claims.write_text(
        "# Claims\n\nSome words.\n\n| claim | verdict |\n|---|---|\n| ViT needs data | holds |\n\nMore.\n"
    )
    site = tmp_path / "site" / "index.html"
    site.parent.mkdir()
    site.write_text("<html></html>")
    text = run_course.summary([("01_a.ipynb", 1.0)], tmp_path, None, [], claims=claims, site_index=site)
    assert "| claim | verdict |\n|---|---|\n| ViT needs data | holds |" in text
    assert "Some words" not in text and "FAILED" not in text
    assert site.as_uri() in text


def test_a_course_runs_with_a_summary_and_no_kernel_warning(tmp_path):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    small_notebook(nbs / "01_first.ipynb", "x = 6 * 7", "print(x)")
    small_notebook(nbs / "02_broken.ipynb", "raise ValueError('on purpose')")
    small_notebook(nbs / "03_never.ipynb", "print('not reached')")
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "run_course.py"),
            "--notebooks",
            str(nbs),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "without encryption" not in run.stderr and "WARNING" not in run.stderr, run.stderr
    assert "02_broken.ipynb failed: ValueError: on purpose" in run.stderr
    assert re.search(r"^01_first\.ipynb +[\d.]+ s$", run.stdout, re.M), run.stdout
    assert re.search(r"^02_broken\.ipynb +[\d.]+ s  FAILED$", run.stdout, re.M), run.stdout
    assert re.search(r"^03_never\.ipynb +not run$", run.stdout, re.M), run.stdout
    executed = json.loads((tmp_path / "out" / "01_first.ipynb").read_text())
    assert executed["cells"][1]["outputs"][0]["text"] == ["42\n"]


def test_a_parameter_no_notebook_declares_is_refused_before_anything_runs(tmp_path, capsys):
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    small_notebook(nbs / "01_first.ipynb", "x = 6 * 7", "print(x)")
    code = run_course.main(["--notebooks", str(nbs), "--out", str(tmp_path / "out"), "-p", "nonexistent", "3"])
    assert code == 2 and not (tmp_path / "out").exists()
    assert "-p nonexistent: no selected notebook declares such a parameter" in capsys.readouterr().err
