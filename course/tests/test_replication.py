"""A re-run against the committed run: rows matched by (condition, seed), timings ignored, every verdict compared
(course.replication and scripts/compare_runs.py)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from course.experiments import Experiment
from course.replication import compare_runs, is_timing, report

ROOT = Path(__file__).resolve().parents[2]


def run_experiment(out: Path, drift: float = 0.0) -> Path:
    """Two arms of three seeds; `drift` moves arm b's accuracies as another machine's kernels might. Each row also
    records a wall time, which differs between any two runs."""
    exp = Experiment("demo", out, params={"epochs": 2})

    def arm(base, moved):
        def one(seed):
            started = time.perf_counter()
            return {"test_acc": base + 0.01 * seed + moved, "wall_s": time.perf_counter() - started + 1e-9 * seed}

        return one

    exp.run("a", arm(0.80, 0.0), seeds=[0, 1, 2])
    exp.run("b", arm(0.50, drift), seeds=[0, 1, 2])
    exp.claim("b1", exp.compare("a", "b"), why="a test")
    return out / "demo.json"


def test_experiment_files_name_the_kernels_their_numbers_came_from(tmp_path):
    saved = json.loads(run_experiment(tmp_path).read_text())
    assert saved["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


def test_a_rerun_on_the_same_machine_is_identical_but_for_its_timings(tmp_path):
    first, again = run_experiment(tmp_path / "first"), run_experiment(tmp_path / "again")
    c = compare_runs(first, again)
    assert c["rows"] == {"matched": 6, "identical": 6, "same_test_acc": 6, "only_committed": 0, "only_rerun": 0}
    assert c["fields_that_differ"] == [] and c["max_diff"] == {}
    assert [v["same_verdict"] for v in c["verdicts"]] == [True]
    assert "6 identical in every field but the timings" in report(c)


def test_numbers_that_moved_are_counted_per_condition_and_a_changed_verdict_is_named(tmp_path):
    first = run_experiment(tmp_path / "first")
    moved = compare_runs(first, run_experiment(tmp_path / "moved", drift=0.002))
    assert moved["rows"]["identical"] == 3 and moved["fields_that_differ"] == ["test_acc"]
    assert moved["max_diff"]["test_acc"] == pytest.approx(0.002)
    assert moved["by_condition"]["a"]["identical"] == 3 and moved["by_condition"]["b"]["same_test_acc"] == 0
    assert moved["verdicts"][0]["same_verdict"] and "b: 0 of 3 rows identical" in report(moved)

    flipped = compare_runs(first, run_experiment(tmp_path / "flipped", drift=0.5))  # b now above a
    v = flipped["verdicts"][0]
    assert v["committed"]["verdict"] == "reproduced" and v["rerun"]["verdict"] == "contradicted"
    assert "VERDICT CHANGED" in report(flipped)


def test_timings_are_the_fields_about_time_only():
    assert all(is_timing(f) for f in ("wall_s", "train_time_s", "images_per_s", "ms", "step_ms", "minutes"))
    assert not any(is_timing(f) for f in ("params", "steps", "test_acc", "epochs", "lr"))


def test_two_different_experiments_are_refused(tmp_path):
    first = json.loads(run_experiment(tmp_path).read_text())
    with pytest.raises(ValueError, match="two different experiments"):
        compare_runs(first, dict(first, experiment="other"))


def script(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compare_runs.py"), *map(str, args)], capture_output=True, text=True
    )


def test_the_script_compares_two_folders_and_writes_its_comparison(tmp_path):
    run_experiment(tmp_path / "committed")
    run_experiment(tmp_path / "rerun", drift=0.002)
    done = script(tmp_path / "committed", tmp_path / "rerun", "--out", tmp_path / "cmp.json")
    assert done.returncode == 0, done.stderr
    assert "experiment demo" in done.stdout and "b1: reproduced" in done.stdout
    written = json.loads((tmp_path / "cmp.json").read_text())["comparisons"]
    assert len(written) == 1 and written[0]["rows"]["identical"] == 3


def test_the_script_says_what_is_wrong_with_its_arguments(tmp_path):
    run_experiment(tmp_path / "committed")
    (tmp_path / "empty").mkdir()
    missing = script(tmp_path / "committed", tmp_path / "nowhere")
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    nothing = script(tmp_path / "committed", tmp_path / "empty")
    assert nothing.returncode != 0 and "no experiment file is in both" in nothing.stderr
    mixed = script(tmp_path / "committed", tmp_path / "committed" / "demo.json")
    assert mixed.returncode != 0 and "two files or two folders" in mixed.stderr


def test_the_results_readme_says_what_the_committed_replications_measured():
    """results/README.md's replication table against the comparison files it names (written by compare_runs.py)."""
    text = (ROOT / "results" / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `replication/20")]
    assert len(rows) >= 3, "results/README.md lists the committed replications"
    for row in rows:
        name, _, found = [cell.strip() for cell in row.strip("|").split("|")]
        comparisons = json.loads((ROOT / "results" / name.strip("`")).read_text())["comparisons"]
        matched = sum(c["rows"]["matched"] for c in comparisons)
        identical = sum(c["rows"]["identical"] for c in comparisons)
        main = next(c for c in comparisons if not c["experiment"].endswith("rates"))
        same_acc, rows_main = main["rows"]["same_test_acc"], main["rows"]["matched"]
        moved = max(s["max_test_acc_diff"] for s in main["by_condition"].values())
        if "every one of the" in found:
            assert f"every one of the {matched} rows identical" in found and identical == matched
        else:
            assert identical < matched
        if "rows keep their test accuracy" in found:
            assert f"{same_acc} of {rows_main} rows keep their test accuracy" in found, (name, same_acc, rows_main)
        if "up to" in found:
            assert f"up to {moved:.4g}" in found or f"up to {moved:.3f}" in found, (name, moved)
        for v in main["verdicts"]:  # a verdict that changed class is named, "a1 reproduced -> inconclusive"
            change = f"{v['id']} {(v['committed'] or {}).get('verdict')} -> {(v['rerun'] or {}).get('verdict')}"
            assert v["same_verdict"] or change in found, f"{name}: the table must say {change!r}"
