"""benchmarks/pretraining_speed.py at the tiniest CPU size: the JSON it writes, and a clear error for an unknown
size."""

from __future__ import annotations

import json
import os
import runpy
import statistics
import subprocess
import sys
import timeit
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from course import timing

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "pretraining_speed.py"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TINY = [
    "--device",
    "cpu",
    "--image-size",
    "32",
    "--depth",
    "1",
    "--batch-size",
    "4",
    "--steps",
    "1",
    "--rounds",
    "2",
    "--warmup",
    "1",
]


def run(*options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *options], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("pretraining_speed") / "x.json"
    done = run(*TINY, "--models", "S,B", "--json", str(path))
    assert done.returncode == 0, done.stderr
    return json.loads(path.read_text())


def test_implementations_and_images_per_s(result):
    models = result["models"]
    assert set(models) == {"S", "B"}
    assert set(models["B"]["implementations"]) == {"vitlib", "timm", "torchvision"}
    assert set(models["S"]["implementations"]) == {"vitlib", "timm"}
    assert "torchvision" in models["S"]["missing"]
    for res in models.values():
        assert len(set(res["parameters"].values())) == 1  # the same architecture everywhere
        for impl in res["implementations"].values():
            assert len(impl["rounds_images_per_s"]) == 2
            assert impl["images_per_s"] == statistics.median(impl["rounds_images_per_s"])
            # the throughput behind the TFLOP/s and MFU columns: FLOPs per image x images/s, over the measured peak
            assert impl["achieved_tflops"] == pytest.approx(impl["train_flops_per_image"] * impl["images_per_s"] / 1e12)
            assert impl["mfu_measured"] == pytest.approx(impl["achieved_tflops"] / result["measured_peak_tflops"])
    for key in ("device_name", "torch", "timm", "torchvision", "date", "settings"):
        assert result[key]


def test_timed_rounds_are_images_over_seconds_in_alternating_order(monkeypatch):
    """timed_rounds (the benchmark's clock) on a clock that only the steps move: a step of "a" takes 0.5 s and one of
    "b" 2 s, so 2 timed steps of 4 images give 8 / 1 = 8 and 8 / 4 = 2 images/s in every round (each round's 2 timed
    steps follow torch.utils.benchmark.Timer's 2 untimed ones)."""
    now, calls = [0.0], []

    def step(name, seconds):
        def run():
            calls.append(name)
            now[0] += seconds

        return run

    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(timeit, "default_timer", lambda: now[0])  # the Timer's clock
    steps = {"a": step("a", 0.5), "b": step("b", 2.0)}
    rates = timing.timed_rounds(steps, warmup=1, rounds=3, steps_per_round=2, batch_size=4, device=torch.device("cpu"))
    assert rates == {"a": [8.0, 8.0, 8.0], "b": [2.0, 2.0, 2.0]}
    assert "".join(calls) == "ab" + "aaaabbbb" + "bbbbaaaa" + "aaaabbbb"  # warm-up, then the order reversed every round


def test_ratios_come_from_the_rounds(result):
    for res in result["models"].values():
        rates = {k: v["rounds_images_per_s"] for k, v in res["implementations"].items()}
        assert set(res["ratios"]) == {f"vitlib/{k}" for k in rates if k != "vitlib"}
        for key, ratio in res["ratios"].items():
            other = key.split("/")[1]
            assert ratio["rounds"] == pytest.approx([a / b for a, b in zip(rates["vitlib"], rates[other])])
            assert ratio["median"] == pytest.approx(statistics.median(ratio["rounds"]))


def test_flops_and_mfu(result):
    for res in result["models"].values():
        analytic = 3 * res["analytic_forward_flops_per_image"]
        assert res["analytic_train_flops_per_image"] == analytic
        for impl in res["implementations"].values():
            # 3x the forward minus the image gradient the backward does not compute (4% for S here, <1% at 224)
            assert impl["train_flops_per_image"] == pytest.approx(analytic, rel=0.05)
            assert 0 < impl["mfu_measured"] <= 1
            assert impl["mfu_nominal"] is None  # no nominal peak on the CPU unless --peak-tflops is given


def test_unknown_model_size_is_a_clear_error(monkeypatch):
    # in this process, where torch is already imported: the script stops before it builds or times anything
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # for its `from throughput import ...`, as when run as a script
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), *TINY, "--models", "S,X"])
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    message = stopped.value.code  # a message as the exit code: printed to stderr, exit status 1
    assert isinstance(message, str) and "'X'" in message and "S, B" in message
