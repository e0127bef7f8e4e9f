"""scripts/run_experiments.py starts each experiment notebook with papermill at its scale, with the sweeps' workers
(--jobs) and how they start (--start, passed as VITLIB_START); papermill itself is replaced here by a stand-in."""

import importlib.util
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
    monkeypatch.delenv("VITLIB_START", raising=False)
    name, _, code = script.run_one("09_position_embeddings", "quick", tmp_path, 1, 3, "forkserver")
    cmd, env = seen["cmd"], seen["env"]
    assert (name, code) == ("09_position_embeddings", 0)
    assert cmd[cmd.index("preset") + 1] == "quick" and cmd[cmd.index("jobs") + 1] == "3"
    assert cmd[cmd.index("out") + 1].endswith("results/quick/09_position_embeddings")
    assert env["VITLIB_START"] == "forkserver" and env["OMP_NUM_THREADS"] == "1"
    script.run_one("09_position_embeddings", "quick", tmp_path, 1, 3, None)
    assert "VITLIB_START" not in seen["env"]  # not given: the notebooks' sweeps fork
