"""environment.yml (conda) and pip's lists (pyproject.toml, the extras in setup.py, the grader's own pyproject.toml)
name the same packages; the grader is an extra, not part of a learner's install."""

import re
import runpy
from pathlib import Path
from unittest import mock

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0].lower()


def extras() -> dict[str, list[str]]:
    """The extras setup.py declares (setup() itself not run)."""
    with mock.patch("setuptools.setup") as setup:
        runpy.run_path(str(ROOT / "setup.py"))
    return setup.call_args.kwargs["extras_require"]


def test_conda_and_pip_list_the_same_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    grader = tomllib.loads((ROOT / "classroom" / "pyproject.toml").read_text())["project"]
    pip = {_name(s) for s in project["dependencies"] + grader["dependencies"]}
    for extra in extras().values():
        pip |= {_name(s) for s in extra}
    pip -= {"vitlib", "vit-classroom"}
    specs = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    specs += [s for entry in specs if isinstance(entry, dict) for s in entry.get("pip", [])]  # those conda lacks
    conda = {CONDA_TO_PIP.get(_name(s), _name(s)) for s in specs if isinstance(s, str)} - {"python", "pip"}
    assert pip == conda, f"only in pyproject: {sorted(pip - conda)}; only in environment.yml: {sorted(conda - pip)}"


def test_the_grader_is_an_extra_of_its_own():
    """A learner's install (the package list of pyproject.toml) does not carry the grader; the classroom extra points
    at classroom/ on this disk, whose own pyproject installs the `classroom` package."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "classroom*" not in project["tool"]["setuptools"]["packages"]["find"]["include"]
    (grader,) = extras()["classroom"]
    assert grader.startswith("vit-classroom @ file://") and grader.endswith("/classroom")
    assert grader in extras()["dev"]
    own = tomllib.loads((ROOT / "classroom" / "pyproject.toml").read_text())
    assert own["project"]["name"] == "vit-classroom" and own["tool"]["setuptools"]["packages"] == ["classroom"]
