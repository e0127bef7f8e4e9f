import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from vitlib.studies.experiments import Experiment, new_run_folder
from vitlib.studies.stats import difference, fmt, mean_std, verdict
from vitlib.train import TrainConfig


def test_mean_std_and_difference():
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)
    assert mean_std([0.5]) == (0.5, 0.0)
    assert fmt([0.8, 0.9, 1.0]) == "0.900 ± 0.100 (n=3)"
    d, se = difference([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert d == 2.0 and se == pytest.approx(1 / math.sqrt(3))
    with pytest.raises(ValueError, match="no values"):
        mean_std([])


@pytest.mark.parametrize(
    "diff,se,expect,want",
    [
        (0.05, 0.01, "greater", "reproduced"),
        (0.01, 0.01, "greater", "partly"),
        (-0.05, 0.01, "greater", "not reproduced"),
        (-0.05, 0.01, "less", "reproduced"),
        (0.005, 0.01, "equal", "reproduced"),
        (0.05, 0.01, "equal", "not reproduced"),
        (0.05, 0.01, "equal", "reproduced"),  # within a tolerance of 0.06 given below
    ],
)
def test_verdict(diff, se, expect, want):
    tol = 0.06 if want == "reproduced" and expect == "equal" and diff == 0.05 else 0.0
    assert verdict(diff, se, expect, tolerance=tol) == want


def test_verdict_rejects_unknown_direction():
    with pytest.raises(ValueError, match="expect"):
        verdict(0.1, 0.1, "bigger")


def test_experiment_rows_summary_files_and_reload(tmp_path):
    exp = Experiment("demo", tmp_path, params={"epochs": 2})
    exp.run("a", lambda s: {"test_acc": 0.8 + 0.01 * s}, seeds=[0, 1, 2], fraction=0.1)
    exp.run("b", lambda s: {"test_acc": 0.5 + 0.01 * s}, seeds=[0, 1, 2], fraction=1.0)
    summary = exp.summary()
    assert [s["condition"] for s in summary] == ["a", "b"]
    assert summary[0]["fraction"] == 0.1 and summary[0]["n"] == 3
    assert summary[0]["mean"] == pytest.approx(0.81) and summary[0]["std"] == pytest.approx(0.01)
    cmp = exp.compare("a", "b")
    assert cmp["diff"] == pytest.approx(0.30) and cmp["verdict"] == "reproduced"
    exp.claim("a beats b", "0.9 vs 0.6", fmt(exp.values("a")), cmp["verdict"])
    saved = json.loads((tmp_path / "demo.json").read_text())
    assert saved["params"] == {"epochs": 2} and saved["vitlib"] and len(saved["rows"]) == 6
    assert saved["verdicts"][0]["verdict"] == "reproduced"
    assert (tmp_path / "demo.csv").read_text().splitlines()[0].startswith("condition,seed,fraction,test_acc")
    again = Experiment.load(tmp_path / "demo.json")
    assert again.values("b") == exp.values("b") and again.fields["a"] == {"fraction": 0.1}
    assert "| a beats b | 0.9 vs 0.6 | 0.810 ± 0.010 (n=3) | reproduced |" in again.verdict_table()


def test_experiment_errors_name_the_problem(tmp_path):
    exp = Experiment("demo")
    exp.run("a", lambda s: {"test_acc": 1.0}, seeds=[0])
    with pytest.raises(KeyError, match="condition 'zzz'.*conditions: a"):
        exp.values("zzz")
    with pytest.raises(ValueError, match="verdict must be one of"):
        exp.claim("c", "1", "2", "yes")
    fig, ax = plt.subplots()
    with pytest.raises(KeyError, match="field 'fraction'"):
        exp.errorbar(ax, "fraction")
    plt.close(fig)


def test_errorbar_and_bar_plot_means(tmp_path):
    exp = Experiment("demo")
    for frac in (0.5, 0.1):
        exp.run(f"vit@{frac}", lambda s, f=frac: {"test_acc": f + 0.01 * s}, seeds=[0, 1, 2], fraction=frac)
    fig, (a1, a2) = plt.subplots(1, 2)
    container = exp.errorbar(a1, "fraction")
    xs, ys = container.lines[0].get_data()
    assert list(xs) == [0.1, 0.5] and list(ys) == pytest.approx([0.11, 0.51])
    exp.bar(a2)
    assert [p.get_height() for p in a2.patches] == pytest.approx([0.51, 0.11])
    plt.close(fig)


def test_new_run_folder_never_reuses(tmp_path):
    a, b = new_run_folder(tmp_path, "07"), new_run_folder(tmp_path, "07")
    assert a != b and a.is_dir() and b.is_dir() and a.parent == tmp_path / "07"


def test_experiment_train_records_metrics_per_seed(one_thread):
    exp = Experiment("t")
    cfg = TrainConfig(
        dataset="fashion-mnist-mini", model="ViT-Micro/7", epochs=1, batch_size=256, subset=512, eval_test=True
    )
    rows = exp.train("micro", cfg, seeds=[0, 1])
    assert [r["seed"] for r in rows] == [0, 1]
    for r in rows:
        assert 0.0 <= r["test_acc"] <= 1.0 and r["params"] > 0 and r["epochs"] == 1 and r["wall_s"] > 0
    assert rows[0]["test_acc"] != rows[1]["test_acc"] or rows[0]["train_loss"] != rows[1]["train_loss"]
