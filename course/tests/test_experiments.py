import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
import torch

from course.claims import CLAIMS, report, scales_table
from course.experiments import Experiment, new_run_folder
from course.stats import all_of, contrast, difference, fmt, mean_std
from course.stats import t_interval as stats_t_interval
from vitlib import create_model
from vitlib.data import get_dataset
from vitlib.train import TrainConfig


def test_mean_std_and_difference():
    assert mean_std([1.0, 2.0, 3.0]) == (2.0, 1.0)
    assert mean_std([0.5]) == (0.5, 0.0)
    assert fmt([0.8, 0.9, 1.0]) == "0.900 ± 0.100 (n=3)"
    d, se = difference([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert d == 2.0 and se == pytest.approx(1 / math.sqrt(3))
    with pytest.raises(ValueError, match="no values"):
        mean_std([])


def test_the_only_rule_is_the_t_rule():
    import course.stats as stats

    # the earlier "beyond 2 SE" rule is gone: one rule for the whole course
    assert not hasattr(stats, "verdict") and not hasattr(stats, "equivalence")


def test_contrast_of_two_independent_effects():
    from scipy import stats as st

    a = stats_t_interval([0.70, 0.72, 0.74], [0.60, 0.61, 0.65])
    b = stats_t_interval([0.80, 0.81, 0.79], [0.79, 0.80, 0.81])
    c = contrast(a, b, n=3, compared="gap at 45 vs at 9,000 images")
    assert math.isclose(c["diff"], a["diff"] - b["diff"]) and math.isclose(c["se"], math.hypot(a["se"], b["se"]))
    # Welch-Satterthwaite over the two effects' variances, and the interval from Student's t
    df = c["se"] ** 4 / (a["se"] ** 4 / a["df"] + b["se"] ** 4 / b["df"])
    assert c["df"] == pytest.approx(df)
    assert c["high"] - c["diff"] == pytest.approx(st.t.ppf(0.975, df) * c["se"])
    assert (c["n"], c["compared"]) == (3, "gap at 45 vs at 9,000 images")
    assert c["verdict"] == ("reproduced" if c["low"] > 0 else "contradicted" if c["high"] < 0 else "inconclusive")
    assert contrast(a, b, n=3, compared="", expect="less")["verdict"] in ("contradicted", "inconclusive")
    far = contrast({"diff": 0.3, "se": 0.01, "df": 8}, {"diff": 0.02, "se": 0.01, "df": 8}, n=5, compared="")
    assert far["verdict"] == "reproduced"
    assert (
        contrast(
            {"diff": 0.3, "se": 0.01, "df": 8}, {"diff": 0.02, "se": 0.01, "df": 8}, n=5, compared="", expect="less"
        )["verdict"]
        == "contradicted"
    )
    for bad in ({"diff": 0.3, "se": -0.01, "df": 4}, {"diff": 0.3, "se": float("nan"), "df": 4}, (0.3, 0.01)):
        with pytest.raises(ValueError, match="contrast: b must be an effect"):
            contrast(far, bad, n=3, compared="")


def test_all_of_reports_the_weakest_part():
    ok = {
        "diff": 0.001,
        "se": 0.001,
        "low": -0.001,
        "high": 0.003,
        "verdict": "reproduced",
        "n": 5,
        "compared": "a vs b",
    }
    unsure = {
        "diff": 0.004,
        "se": 0.004,
        "low": -0.005,
        "high": 0.013,
        "verdict": "inconclusive",
        "n": 3,
        "compared": "a vs c",
    }
    both = all_of(ok, unsure)
    assert both["verdict"] == "inconclusive" and both["diff"] == 0.004 and both["n"] == 3
    assert both["compared"] == "a vs b; a vs c"
    assert all_of(ok, {**unsure, "verdict": "contradicted"})["verdict"] == "contradicted"
    assert all_of(ok, ok)["verdict"] == "reproduced"


def test_experiment_rows_summary_files_and_reload(tmp_path):
    exp = Experiment("demo", tmp_path, params={"epochs": 2})
    exp.run("a", lambda s: {"test_acc": 0.8 + 0.01 * s}, seeds=[0, 1, 2], fraction=0.1)
    exp.run("b", lambda s: {"test_acc": 0.5 + 0.01 * s}, seeds=[0, 1, 2], fraction=1.0)
    summary = exp.summary()
    assert [s["condition"] for s in summary] == ["a", "b"]
    assert summary[0]["fraction"] == 0.1 and summary[0]["n"] == 3
    assert summary[0]["mean"] == pytest.approx(0.81) and summary[0]["std"] == pytest.approx(0.01)
    cmp = exp.compare("a", "b")
    assert cmp["diff"] == pytest.approx(0.30) and cmp["verdict"] == "reproduced" and cmp["n"] == 3
    assert cmp["compared"] == "a 0.810 ± 0.010 (n=3) vs b 0.510 ± 0.010 (n=3)"
    exp.claim("b1", cmp, why="a test")
    exp.claim("b1", cmp, why="judged again")  # a claim judged twice keeps its last verdict
    saved = json.loads((tmp_path / "demo.json").read_text())
    assert saved["params"] == {"epochs": 2} and saved["vitlib"] and len(saved["rows"]) == 6
    assert saved["minutes"] >= 0 and saved["cpu"]
    assert [v["id"] for v in saved["verdicts"]] == ["b1"] and saved["verdicts"][0]["why"] == "judged again"
    assert saved["verdicts"][0]["claim"] == CLAIMS["b1"]["claim"] and saved["verdicts"][0]["seeds"] == 3
    assert (tmp_path / "demo.csv").read_text().splitlines()[0].startswith("condition,seed,fraction,test_acc")
    again = Experiment.load(tmp_path / "demo.json")
    assert again.values("b") == exp.values("b") and again.fields["a"] == {"fraction": 0.1}
    assert "| (b1) without position embeddings ViT does worse | App. D.4, Table 8" in again.verdict_table()
    assert (
        "| +0.300 [+0.277, +0.323], p 3.3e-06; a 0.810 ± 0.010 (n=3) vs b 0.510 ± 0.010 (n=3) | **reproduced** | "
        in (again.verdict_table())
    )


def test_experiment_errors_name_the_problem(tmp_path):
    exp = Experiment("demo")
    exp.run("a", lambda s: {"test_acc": 1.0 - 0.01 * s}, seeds=[0, 1])
    with pytest.raises(KeyError, match="condition 'zzz'.*conditions: a"):
        exp.values("zzz")
    judged = {"diff": 0, "se": 0, "low": 0, "high": 0, "p": 1.0, "n": 1, "compared": ""}
    with pytest.raises(ValueError, match="verdict must be one of"):
        exp.claim("b1", {**judged, "verdict": "partly"})
    with pytest.raises(ValueError, match="lacks low, high, p"):  # a comparison judged some other way is refused
        exp.claim("b1", {"diff": 0.1, "se": 0.01, "n": 3, "compared": "", "verdict": "reproduced"})
    with pytest.raises(KeyError, match="zz"):
        exp.claim("zz", exp.compare("a", "a"))
    with pytest.raises(ValueError, match="needs an equivalence margin"):
        exp.compare("a", "a", expect="equal")
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
    models = []

    def model(seed):
        models.append(create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1))
        return models[-1]

    rows = exp.train("micro", cfg, seeds=[0, 1], model=model)
    assert [r["seed"] for r in rows] == [0, 1]
    # test_acc is the trained model's accuracy on the 2,000 test images, recomputed here by hand
    data = get_dataset("fashion-mnist-mini")
    test, mean, std = data.test, torch.tensor(data.mean).view(1, -1, 1, 1), torch.tensor(data.std).view(1, -1, 1, 1)
    with torch.no_grad():
        logits = [m.eval()((test.images.float() / 255 - mean) / std) for m in models]
    for r, out in zip(rows, logits):
        assert r["test_acc"] == pytest.approx((out.argmax(1) == test.labels).float().mean().item(), abs=1e-6)
        assert r["test_acc"] > 0.2  # two steps of 256 images already beat chance (0.1): about 0.35 for both seeds
        assert r["params"] == 139_018 and r["epochs"] == 1 and r["wall_s"] > 0  # ViT-Micro/7 on 28x28x1, 10 classes
    assert rows[0]["test_acc"] != rows[1]["test_acc"] or rows[0]["train_loss"] != rows[1]["train_loss"]


def test_the_claims_report_puts_every_scale_beside_the_paper(tmp_path):
    for scale, folder, acc in (("quick", "quick", 0.6), ("reference", "reference", 0.7)):
        exp = Experiment("pos", tmp_path / folder / "09_position_embeddings", params={"preset": scale})
        exp.run("learned", lambda s, acc=acc: {"test_acc": acc + 0.01 * s}, seeds=[0, 1, 2])
        exp.run("none", lambda s: {"test_acc": 0.55 + 0.01 * s}, seeds=[0, 1, 2])
        exp.claim("b1", exp.compare("learned", "none"))
    content = report(tmp_path)
    b1 = next(c for c in content["claims"] if c["id"] == "b1")
    assert b1["quick"]["verdict"] == b1["reference"]["verdict"] == "reproduced" and b1["full"] is None
    assert b1["reference"]["ours"]["effect"] == pytest.approx(0.15) and b1["reference"]["seeds"] == 3
    assert len(content["claims"]) == len(CLAIMS) >= 10
    table = (tmp_path / "CLAIMS.md").read_text()
    assert "| b1 | without position embeddings ViT does worse |" in table and "not measured yet: needs a GPU" in table
    assert "| a1 |" in table and "not run yet" in table  # a claim no run has judged says so
    assert json.loads((tmp_path / "claims.json").read_text())["claims"][0]["id"] == "a1"
    beside = scales_table(exp, "09_position_embeddings", tmp_path)
    assert "| (b1) without position embeddings ViT does worse | **reproduced** +0.150" in beside


@pytest.mark.parametrize("batched", [False, True])
def test_known_runs_are_taken_as_they_are_and_the_others_run(batched):
    exp, called = Experiment("k"), []

    def fn(seed):
        called.append(seed)
        return {"test_acc": 0.5 + seed / 100}

    if batched:
        with exp.batch():
            rows = exp.run("a", fn, [0, 1, 2], known={1: {"test_acc": 0.9, "wall_s": 3.0}}, lr=0.1)
    else:
        rows = exp.run("a", fn, [0, 1, 2], known={1: {"test_acc": 0.9, "wall_s": 3.0}}, lr=0.1)
    assert called == [0, 2] and [r["seed"] for r in rows] == [0, 1, 2]
    assert [r["test_acc"] for r in rows] == [0.5, 0.9, 0.52] and rows[1]["lr"] == 0.1 and rows[1]["wall_s"] == 3.0


def test_a_claim_its_design_could_not_test_says_so_and_stays_out_of_holm(tmp_path):
    """c2 of notebook 11 when both poolings choose one rate: its two arms are one condition, so the interval cannot
    say anything; the row is 'not tested' (the interval's verdict kept as measured) and the report leaves it out of
    Holm's correction."""
    from course.stats import NOT_TESTED

    exp = Experiment("11_class_token_and_norm", tmp_path / "quick" / "11", {})
    for seed, (a, b) in enumerate([(0.80, 0.70), (0.82, 0.71), (0.81, 0.69)]):
        exp.add("gap lr=0.003", seed, {"test_acc": a})
        exp.add("cls lr=0.003", seed, {"test_acc": b})
    same = exp.compare("gap lr=0.003", "gap lr=0.003", expect="greater")
    assert same["tested"] is False  # compare sees that its two arms are one condition
    row = exp.claim("c2", same, why="both poolings chose one rate")
    assert row["verdict"] == NOT_TESTED and row["measured"] == "inconclusive"
    differ = exp.compare("gap lr=0.003", "cls lr=0.003", expect="greater")
    assert differ["tested"] and exp.claim("c2", differ)["verdict"] == "reproduced"
    assert exp.claim("c2", differ, tested=False)["verdict"] == NOT_TESTED  # a design the notebook knows is no test
    exp.claim("c2", same)
    exp.claim("c1", exp.compare("gap lr=0.003", "cls lr=0.003", expect="equal", margin=0.01))
    out = report(tmp_path)
    found = {c["id"]: c["quick"] for c in out["claims"] if c["quick"]}
    assert found["c2"]["verdict"] == NOT_TESTED and found["c2"]["measured"] == "inconclusive"
    assert "p_holm" not in found["c2"]["ours"] and "p_holm" in found["c1"]["ours"]
    assert "**not tested (measured: inconclusive)**" in (tmp_path / "CLAIMS.md").read_text()
