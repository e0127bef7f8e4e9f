"""scripts/run_experiments.py starts each experiment notebook with papermill at its scale, with the sweeps' workers
(--jobs) and how they start (--start, passed as VITLIB_START); papermill itself is replaced here by a stand-in."""

import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    spec = importlib.util.spec_from_file_location("run_experiments", ROOT / "scripts" / "run_experiments.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_notebook_gets_its_scale_jobs_and_how_its_workers_start(tmp_path, monkeypatch):
    script, seen = load_script(), {}

    def papermill(cmd, cwd, env, stdout, stderr):
        seen.update(cmd=cmd, env=env)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(script.subprocess, "run", papermill)
    monkeypatch.setattr(script, "RESULTS", tmp_path / "results")  # a finished run publishes there, not in the repo
    monkeypatch.delenv("VITLIB_START", raising=False)
    name, _, code = script.run_one("09_position_embeddings", "quick", tmp_path, 1, 3, "forkserver")
    cmd, env = seen["cmd"], seen["env"]
    assert (name, code) == ("09_position_embeddings", 0)
    assert cmd[cmd.index("preset") + 1] == "quick" and cmd[cmd.index("jobs") + 1] == "3"
    assert cmd[cmd.index("out") + 1].endswith("results/quick/09_position_embeddings")
    assert env["VITLIB_START"] == "forkserver" and env["OMP_NUM_THREADS"] == "1"
    script.run_one("09_position_embeddings", "quick", tmp_path, 1, 3, None)
    assert "VITLIB_START" not in seen["env"]  # not given: the notebooks' sweeps fork


def fake_notebook(rows_before_stop=None, code=0):
    """A stand-in for papermill: an experiment that saves a row per seed into its `out` (as the notebooks do) and,
    with `rows_before_stop`, is stopped (Ctrl-C) after that many rows; `calls` counts the runs it trained."""
    calls = []

    def papermill(cmd, cwd, env, stdout, stderr):
        import os
        from unittest import mock

        from course.experiments import Experiment

        out = Path(cwd) / cmd[cmd.index("out") + 1]
        with mock.patch.dict(os.environ, {"VITLIB_RESUME": env["VITLIB_RESUME"]}):
            exp = Experiment("demo", out, params={"preset": "quick"})

        def run(seed):
            if rows_before_stop is not None and len(calls) == rows_before_stop:
                raise KeyboardInterrupt
            calls.append(seed)
            return {"test_acc": 0.5 + seed / 100}

        exp.run("a", run, range(3), lr=0.01)
        return subprocess.CompletedProcess(cmd, code)

    return papermill, calls


def committed(tmp_path):
    """results/quick/09_position_embeddings holding a finished experiment's file, and its text."""
    folder = tmp_path / "results" / "quick" / "09_position_embeddings"
    folder.mkdir(parents=True)
    (folder / "demo.json").write_text('{"experiment": "demo", "rows": [], "verdicts": []}')
    return folder, (folder / "demo.json").read_text()


def test_a_stopped_or_failed_run_leaves_the_committed_results_whole(tmp_path, monkeypatch):
    script = load_script()
    folder, before = committed(tmp_path)
    monkeypatch.setattr(script, "RESULTS", tmp_path / "results")
    for papermill in (fake_notebook(rows_before_stop=1)[0], fake_notebook(code=1)[0]):
        monkeypatch.setattr(script.subprocess, "run", papermill)
        runs = tmp_path / "runs" / str(len(list(tmp_path.glob("runs/*"))))
        runs.mkdir(parents=True)
        try:
            _, _, code = script.run_one("09_position_embeddings", "quick", runs, 1, 1, None)
            assert code == 1
        except KeyboardInterrupt:
            pass
        assert (folder / "demo.json").read_text() == before and sorted(p.name for p in folder.iterdir()) == [
            "demo.json"
        ]
        assert not (runs / "09_position_embeddings.done").exists()
        assert [p.name for p in folder.parent.iterdir()] == ["09_position_embeddings"]  # nothing staged left behind


def test_a_resumed_run_reuses_the_rows_it_saved_and_then_replaces_the_results(tmp_path, monkeypatch):
    script = load_script()
    folder, before = committed(tmp_path)
    monkeypatch.setattr(script, "RESULTS", tmp_path / "results")
    monkeypatch.delenv("VITLIB_RESUME", raising=False)
    runs = tmp_path / "runs" / "experiments-quick-1"
    runs.mkdir(parents=True)
    stopped, calls = fake_notebook(rows_before_stop=2)
    monkeypatch.setattr(script.subprocess, "run", stopped)
    try:
        script.run_one("09_position_embeddings", "quick", runs, 1, 1, None)
    except KeyboardInterrupt:
        pass
    assert calls == [0, 1] and (folder / "demo.json").read_text() == before
    finishing, calls = fake_notebook()
    monkeypatch.setattr(script.subprocess, "run", finishing)
    _, _, code = script.run_one("09_position_embeddings", "quick", runs, 1, 1, None, resume=True)
    assert code == 0 and calls == [2]  # seeds 0 and 1 came from the interrupted run's file
    rows = json.loads((folder / "demo.json").read_text())["rows"]
    assert [(r["seed"], r["test_acc"], r["lr"]) for r in rows] == [(0, 0.5, 0.01), (1, 0.51, 0.01), (2, 0.52, 0.01)]
    assert (runs / "09_position_embeddings.done").exists()


def test_the_claims_report_names_a_damaged_results_file(tmp_path):
    import pytest

    from course.claims import results_of

    folder = tmp_path / "quick" / "11_class_token_and_norm"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text('{"verdicts": [{"id": "x1", "verdict": "reproduced"}]}')
    with pytest.raises(ValueError, match=r"x\.json: the verdict of x1 lacks effect, se, compared, seeds"):
        results_of(tmp_path, "quick")
    v = {"id": "x1", "verdict": "reproduced", "effect": float("nan"), "se": 0.1, "compared": "", "seeds": 3}
    (folder / "x.json").write_text(json.dumps({"verdicts": [v]}))
    with pytest.raises(ValueError, match=r"x\.json: the verdict of x1 has effect nan and se 0.1: a run diverged"):
        results_of(tmp_path, "quick")
    (folder / "x.json").write_text('{"verdicts": [')
    with pytest.raises(ValueError, match=r"x\.json: not a readable results file"):
        results_of(tmp_path, "quick")
    (folder / "x.json").unlink()
    (tmp_path / "quick" / ".11_class_token_and_norm.new").mkdir()
    (tmp_path / "quick" / ".11_class_token_and_norm.new" / "x.json").write_text("{")
    assert results_of(tmp_path, "quick") == {}  # a folder being replaced is not read


def test_the_scripts_end_a_failure_with_an_error_line_not_a_traceback(tmp_path):
    """issue 60: a damaged results file through the claims report's command line: `error: ...` naming the file, exit
    code 2, no traceback (--debug: tests/test_utils.py)."""
    import sys

    folder = tmp_path / "quick" / "11_class_token_and_norm"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text('{"verdicts": [')
    cmd = [sys.executable, str(ROOT / "scripts" / "claims_report.py"), "--results", str(tmp_path)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "Traceback" not in run.stderr
    assert "x.json: not a readable results file" in run.stderr
