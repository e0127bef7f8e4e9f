"""Notebook 00's course table and the README's notebook list name every notebook of the course."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def tour_markdown() -> str:
    cells = json.loads((ROOT / "notebooks" / "00_setup_tour.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_is_in_the_tour_and_the_readme(path):
    assert f"| `{path.stem}` |" in tour_markdown(), f"notebook 00's course table does not list {path.stem}"
    assert f"| `{path.name}` |" in (ROOT / "README.md").read_text(), f"README.md's notebook list lacks {path.name}"


def test_the_engineering_appendix_is_pointed_to():
    """The command line, papermill, checkpoints and resuming live in notebook 20; 00, 06 and 16 point there."""
    for stem in ("00_setup_tour", "06_first_training", "16_pretraining"):
        cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        assert "appendix notebook 20" in text, f"{stem} has no pointer to the engineering appendix"
