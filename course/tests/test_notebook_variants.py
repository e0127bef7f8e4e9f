"""Every notebook runs to its end at parameters other than its defaults.

A check that holds only at the default seed is a statement about that seed, not about ViT. Each notebook lists, in
its metadata (`metadata.vitlib.variants`), a few non-default parameter sets (other seeds, sizes, shorter training);
they are run here with papermill, each in a fresh folder. One test class per notebook, so that pytest-xdist's
`--dist loadscope` spreads the notebooks over its workers.

Which ones run (environment VITLIB_VARIANTS):
- unset (`make test`): none; each is listed as skipped. nbval runs every notebook at its defaults anyway, and the
  first variants (5-30 s each for 00-05, 07 and 20; 17-65 s for the experiment notebooks 06 and 08-19) would cost
  `make test` 8-10 minutes of its 2 cores;
- `first` (`make test-presets`, which CI runs after `make test` where time allows): the first variant of every
  notebook; `all` (`make test-variants`): every variant of every notebook.
"""

import json
import os
from pathlib import Path

import pytest
from notebook_runs import execute

from course.notebook import _type_ok, declared_parameters

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def load(path):
    return json.loads(path.read_text())


def declared(nb) -> dict:
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    return declared_parameters("".join(cell["source"]))


def variants(nb) -> list[dict]:
    return nb["metadata"].get("vitlib", {}).get("variants", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_lists_non_default_runs(path):
    nb = load(path)
    found, types = variants(nb), declared(nb)
    assert len(found) >= 2, f"{path.name}: list at least 2 non-default parameter sets in metadata.vitlib.variants"
    for params in found:
        assert params, f"{path.name}: an empty variant is the default run"
        for name, value in params.items():
            assert name in types, f"{path.name}: variant parameter {name!r} is not declared in the parameters cell"
            assert types[name] is None or _type_ok(value, types[name]), f"{path.name}: {name}={value!r} mistyped"


def run_variant(path: Path, index: int, tmp_path: Path):
    nb = load(path)
    execute(path, tmp_path, variants(nb)[index], declared(nb))


SELECTIONS = ("", "first", "all")  # VITLIB_VARIANTS: which variants run (see the module's text)


def selection() -> str:
    chosen = os.environ.get("VITLIB_VARIANTS", "")
    if chosen not in SELECTIONS:
        raise ValueError(f"VITLIB_VARIANTS={chosen!r}: use first or all, or leave it unset (make test).")
    return chosen


def selected(nb, chosen: str) -> tuple[list[int], str | None]:
    """(the indices of the variants to run, why the first one is skipped or None)."""
    ids = list(range(len(variants(nb))))
    if chosen == "all":
        return ids, None
    if chosen == "":
        return ids[:1], "a notebook's other parameter sets: make test-presets runs the first (CI: time allowing)"
    return ids[:1], None


def _variant_class(path: Path):
    ids, skip = selected(load(path), selection())

    @pytest.mark.skipif(skip is not None, reason=skip or "")
    @pytest.mark.parametrize("index", ids, ids=[f"variant{i}" for i in ids])
    def test_runs_to_its_end(self, index, tmp_path):
        run_variant(path, index, tmp_path)

    return type(f"TestVariants_{path.stem}", (), {"test_runs_to_its_end": test_runs_to_its_end})


for _path in NOTEBOOKS:
    _cls = _variant_class(_path)
    globals()[_cls.__name__] = _cls


def test_make_test_leaves_every_variant_to_make_test_presets():
    """make test runs no variant (nbval runs every notebook at its defaults); `first` (make test-presets) runs every
    notebook's first, `all` every one."""
    for path in NOTEBOOKS:
        nb = load(path)
        ids, skip = selected(nb, "")
        assert ids == [0] and skip and "make test-presets" in skip, path.name
        assert selected(nb, "first") == ([0], None)
        assert selected(nb, "all") == (list(range(len(variants(nb)))), None)


def test_a_misspelt_selection_is_refused(monkeypatch):
    monkeypatch.setenv("VITLIB_VARIANTS", "firts")
    with pytest.raises(ValueError, match="VITLIB_VARIANTS=.firts.: use first or all"):
        selection()
