"""Every notebook's `full` preset runs to its end, with its budgets shrunk, on the bundled data.

A `full` preset is meant for a GPU and the full Fashion-MNIST, so nothing else in the suite runs it: a bug that only
its sizes reach (15's MAE FLOPs print with 12 of 49 patches visible) surfaced only on a GPU. Each notebook that has
a `preset` parameter lists in `metadata.vitlib.full_smoke` its `full` preset with the budgets shrunk (steps, epochs,
images, seeds: the model sizes, patch sizes and everything else stay the preset's). The kernel reads "fashion-mnist"
as the bundled subset (a `sitecustomize` put on its `PYTHONPATH`, for these runs only), so the preset's data path and
shapes are exercised offline. One test class per notebook, so that `--dist loadscope` spreads them over the workers.

They take about 10 minutes on 2 cores, so `make test` lists them as skipped and `make test-presets` (environment
VITLIB_FULL_PRESETS=1, with the experiment notebooks' first variants) runs them; CI runs both, time allowing (.ci/run).
"""

import json
import os
from pathlib import Path

import pytest
from notebook_runs import execute

from course.notebook import _type_ok, declared_parameters

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Loaded by the kernel's interpreter at start-up: the full Fashion-MNIST is not on the test machines.
BUNDLED_AS_FULL = '''"""Test only: the full presets on the bundled data ("fashion-mnist" is "fashion-mnist-mini")."""
import vitlib.data.sources as _sources

_sources.SOURCES["fashion-mnist"] = _sources.SOURCES["fashion-mnist-mini"]
'''


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def declared(nb: dict) -> dict:
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    return declared_parameters("".join(cell["source"]))


WITH_PRESETS = [p for p in NOTEBOOKS if "preset" in declared(load(p))]


def test_every_notebook_with_presets_lists_its_shrunk_full_run():
    assert len(WITH_PRESETS) >= 13  # 06 and 08-19
    for path in WITH_PRESETS:
        nb = load(path)
        smoke, types = nb["metadata"].get("vitlib", {}).get("full_smoke"), declared(nb)
        assert smoke, f"{path.name}: list the full preset with shrunk budgets in metadata.vitlib.full_smoke"
        assert smoke.get("preset") == "full", f"{path.name}: full_smoke must set preset='full'"
        for name, value in smoke.items():
            assert name in types, f"{path.name}: full_smoke parameter {name!r} is not declared"
            assert types[name] is None or _type_ok(value, types[name]), f"{path.name}: {name}={value!r} mistyped"
        assert "model" not in smoke, f"{path.name}: keep the full preset's model; shrink budgets only"


def run_full_preset(path: Path, tmp_path: Path, monkeypatch) -> None:
    nb = load(path)
    params = dict(nb["metadata"]["vitlib"]["full_smoke"])
    if "device" in declared(nb):
        params["device"] = "cpu"
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(BUNDLED_AS_FULL)
    monkeypatch.setenv("PYTHONPATH", str(shim))  # the kernel inherits it; this process does not re-read it
    execute(path, tmp_path, params, declared(nb))


def _full_class(path: Path):
    @pytest.mark.skipif(os.environ.get("VITLIB_FULL_PRESETS") != "1", reason="make test-presets runs them")
    def test_full_preset_runs_to_its_end(self, tmp_path, monkeypatch):
        run_full_preset(path, tmp_path, monkeypatch)

    name = "test_full_preset_runs_to_its_end"
    return type(f"TestFullPreset_{path.stem}", (), {name: test_full_preset_runs_to_its_end})


for _path in WITH_PRESETS:
    _cls = _full_class(_path)
    globals()[_cls.__name__] = _cls
