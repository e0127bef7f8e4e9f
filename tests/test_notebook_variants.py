"""Every notebook runs to its end at parameters other than its defaults.

A check that holds only at the default seed is a statement about that seed, not about ViT. Each notebook lists, in
its metadata (`metadata.vitlib.variants`), a few non-default parameter sets (other seeds, sizes, shorter training);
they are run here with papermill, each in a fresh folder. One test class per notebook, so that pytest-xdist's
`--dist loadscope` spreads the notebooks over its workers.

`make test` runs the first variant of every notebook (within its time budget); `make test-variants` (environment
VITLIB_VARIANTS=all) runs every one of them.
"""

import json
import os
from pathlib import Path

import pytest
from notebook_runs import execute

from vitlib.studies.notebook import _type_ok, declared_parameters

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


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


def _variant_class(path: Path):
    ids = list(range(len(variants(load(path)))))
    if os.environ.get("VITLIB_VARIANTS", "first") != "all":
        ids = ids[:1]

    @pytest.mark.parametrize("index", ids, ids=[f"variant{i}" for i in ids])
    def test_runs_to_its_end(self, index, tmp_path):
        run_variant(path, index, tmp_path)

    return type(f"TestVariants_{path.stem}", (), {"test_runs_to_its_end": test_runs_to_its_end})


for _path in NOTEBOOKS:
    _cls = _variant_class(_path)
    globals()[_cls.__name__] = _cls
