"""environment.yml (conda) and pyproject.toml (pip) list the same packages."""

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0].lower()


def test_conda_and_pip_list_the_same_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip = {_name(s) for s in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        pip |= {_name(s) for s in extra}
    pip.discard("vitlib")
    specs = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    specs += [s for entry in specs if isinstance(entry, dict) for s in entry.get("pip", [])]  # those conda lacks
    conda = {CONDA_TO_PIP.get(_name(s), _name(s)) for s in specs if isinstance(s, str)} - {"python", "pip"}
    assert pip == conda, f"only in pyproject: {sorted(pip - conda)}; only in environment.yml: {sorted(conda - pip)}"
