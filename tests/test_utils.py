"""vitlib.utils: paths printed relative to the repository, and no committed notebook output that shows where the
machine that ran it kept the repository or its temporary folders."""

import json
import re
from pathlib import Path

import pytest

from vitlib.utils import REPO_ROOT, repo_relative, spreadsheet_safe, write_csv

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ABSOLUTE = re.compile(r"(?<![\w.])/(?:work|tmp|root|home|Users|private|var/folders)/[^\s'\"]*")


def test_repo_relative_hides_where_the_repository_lies():
    assert repo_relative(REPO_ROOT / "data" / "cache") == "data/cache"
    assert repo_relative(f"not in {REPO_ROOT / 'data'} or fails") == "not in data or fails"
    assert repo_relative(REPO_ROOT) == "."
    assert repo_relative("/elsewhere/file") == "/elsewhere/file"


def test_write_csv_with_fixed_columns_and_cells_a_spreadsheet_shows_as_text(tmp_path):
    rows = [{"name": "=HYPERLINK(1)", "points": "-1", "note": "@x", "extra": 1}, {"name": "+a"}]
    safe = write_csv(tmp_path / "safe.csv", rows, ["name", "points", "note"], escape_formulas=True)
    assert safe.read_text().splitlines() == ["name,points,note", "'=HYPERLINK(1),-1,'@x", "'+a,,"]
    plain = write_csv(tmp_path / "plain.csv", rows)  # data read back by programs: as it is, every key a column
    assert plain.read_text().splitlines() == ["name,points,note,extra", "=HYPERLINK(1),-1,@x,1", "+a,,,"]
    assert [spreadsheet_safe(v) for v in ("-2.5", "-", "\tx", "ok")] == ["-2.5", "-", "'\tx", "ok"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.csv", "safe.csv"]  # no temporary file left


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_outputs_show_no_absolute_path(path):
    found = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        for out in cell.get("outputs", []):
            texts = [out.get("text", "")] + [out.get("data", {}).get("text/plain", ""), out.get("evalue", "")]
            text = "".join("".join(t) if isinstance(t, list) else t for t in texts)
            found += [f"cell {i}: {m}" for m in ABSOLUTE.findall(text)]
    assert not found, f"{path.name} prints paths of the machine that ran it (use vitlib.utils.repo_relative): {found}"


def _failing(exc):
    def main():
        raise exc

    return main


@pytest.mark.parametrize(
    "exc, code, words",
    [
        (OSError(28, "No space left on device", "runs/x/model.safetensors"), 2, ["runs/x/model.safetensors", "full"]),
        (OSError(30, "Read-only file system", "/results/a.json"), 2, ["read-only", "write elsewhere"]),
        (MemoryError(), 2, ["out of memory", "smaller model"]),
        (RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"), 2, ["out of memory"]),
        (RuntimeError("Expected one of cpu, cuda device type at start of device string: gpu"), 2, ["gpu"]),
        (KeyError("effect"), 2, ["KeyError", "effect"]),
        (KeyboardInterrupt(), 130, ["stopped"]),
    ],
)
def test_the_command_line_boundary_turns_failures_into_messages(capsys, monkeypatch, exc, code, words):
    """issue 60: what a user meets (a full or read-only disk, out of memory, a bad device, a damaged file) ends with
    `error: ...` and exit code 2 (Ctrl-C 130), never a traceback; --debug shows the traceback."""
    from vitlib.utils import command_line

    monkeypatch.setattr("sys.argv", ["tool", "--x", "1"])
    monkeypatch.delenv("VITLIB_DEBUG", raising=False)
    assert command_line(_failing(exc)) == code
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and all(w in err for w in words), err
    monkeypatch.setattr("sys.argv", ["tool", "--debug", "--x", "1"])
    with pytest.raises(type(exc)):
        command_line(_failing(exc))
    import sys

    assert sys.argv == ["tool", "--x", "1"]  # --debug is not passed on to the tool's own parser
