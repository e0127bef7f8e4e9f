import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
import torch

from course.experiments import Experiment
from course.sweep import best_lr, condition, group_conditions, plot_sweep, rate_text, sweep, sweep_means
from vitlib import create_model
from vitlib.data import get_dataset
from vitlib.train import TrainConfig


def fake(exp, group, accs):
    """Rows as a sweep would write them, without training: {lr: [val_acc per seed]} (test_acc = val_acc - 0.01)."""
    for lr, vals in accs.items():
        exp.run(
            condition(group, lr),
            lambda s, vals=vals: {"val_acc": vals[s], "test_acc": vals[s] - 0.01},
            seeds=range(len(vals)),
            group=group,
            lr=lr,
        )


def test_condition_names():
    assert condition("cls", 0.001) == "cls lr=0.001"
    assert condition("gap", 3e-4) == "gap lr=0.0003"


def test_best_lr_is_chosen_on_the_given_metric_and_conditions_sort_by_lr():
    exp = Experiment("s")
    fake(exp, "cls", {3e-3: [0.80, 0.82], 1e-3: [0.70, 0.72], 1e-2: [0.5, 0.5]})
    fake(exp, "gap", {1e-3: [0.9, 0.9]})
    assert group_conditions(exp, "cls") == ["cls lr=0.001", "cls lr=0.003", "cls lr=0.01"]
    assert best_lr(exp, "cls") == 3e-3 and best_lr(exp, "gap") == 1e-3
    means = sweep_means(exp, "cls", "test_acc")
    assert list(means) == [1e-3, 3e-3, 1e-2] and means[3e-3][0] == pytest.approx(0.80)
    with pytest.raises(KeyError, match="no swept conditions for group 'zzz'.*groups: cls, gap"):
        best_lr(exp, "zzz")


def test_plot_sweep_draws_one_line_per_group_on_a_log_axis():
    exp = Experiment("s")
    fake(exp, "cls", {1e-3: [0.7, 0.72], 3e-3: [0.8, 0.82]})
    fake(exp, "gap", {1e-3: [0.75, 0.77], 3e-3: [0.6, 0.62]})
    fig, ax = plt.subplots()
    best = plot_sweep(exp, ax, ["cls", "gap"])
    assert best == {"cls": 3e-3, "gap": 1e-3}
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cls", "gap"]
    plt.close(fig)


def test_sweep_trains_every_lr_and_seed_and_rejects_bad_input():
    torch.set_num_threads(1)
    data = get_dataset("fashion-mnist-mini", subset=200, seed=0)
    cfg = TrainConfig(epochs=1, batch_size=100, warmup_epochs=0.5, device="cpu", progress=False)
    exp = Experiment("s")
    make = lambda seed: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1, depth=1, pool="gap")
    names = sweep(exp, "gap", cfg, [1e-3, 3e-3], seeds=[0, 1], data=data, model=make, pool="gap")
    assert names == ["gap lr=0.001", "gap lr=0.003"]
    assert len(exp.rows) == 4 and {r["lr"] for r in exp.rows} == {1e-3, 3e-3}
    assert all(r["pool"] == "gap" and r["group"] == "gap" and 0 <= r["test_acc"] <= 1 for r in exp.rows)
    for bad, match in (([], "at least one learning rate"), ([0.0], "positive"), ([1e-3, 1e-3], "repeat")):
        with pytest.raises(ValueError, match=match):
            sweep(exp, "x", cfg, bad, seeds=[0], data=data, model=make)


def test_binomial_tolerance_is_one_binomial_standard_error():
    from course.sweep import binomial_tolerance

    assert binomial_tolerance(0.5, 2500) == pytest.approx(0.01)
    assert binomial_tolerance(0.8, 10_000) == pytest.approx(0.004)
    with pytest.raises(ValueError, match="accuracy"):
        binomial_tolerance(80.0, 100)
    with pytest.raises(ValueError, match="n_test"):
        binomial_tolerance(0.8, 0)


def test_rate_text_says_what_was_tried_and_whether_the_choice_is_bracketed():
    inside = {"best": 0.003, "lrs": [0.001, 0.003, 0.009], "bracketed": True}
    edge = {"best": 0.001, "lrs": [0.001, 0.003, 0.009], "bracketed": False}
    assert rate_text(inside) == "rates tried 0.001, 0.003, 0.009 -> 0.003"
    assert rate_text(edge) == "rates tried 0.001, 0.003, 0.009 -> 0.001 (at the edge of what was tried)"
    assert rate_text(inside, short=True) == "rate 0.003 (tried 0.001, 0.003, 0.009)"
    assert rate_text(edge, short=True) == "rate 0.001 (tried 0.001, 0.003, 0.009, at the edge)"
    assert rate_text({"best": 2e-3 / 3, "lrs": [2e-3 / 3, 2e-3], "bracketed": False}).endswith(
        "-> 0.00067 (at the edge of what was tried)"
    )
    widened = {"best": 0.009, "lrs": [0.001, 0.003, 0.009, 0.027], "widened": [0.027], "bracketed": True}
    assert rate_text(widened) == "rates tried 0.001, 0.003, 0.009, 0.027 -> 0.009 (the grid widened by 0.027)"
    assert rate_text({**widened, "best": 0.027, "bracketed": False}) == (
        "rates tried 0.001, 0.003, 0.009, 0.027 -> 0.027 (the grid widened by 0.027; at the edge of what was tried)"
    )
    assert rate_text(widened, short=True) == "rate 0.009 (tried 0.001, 0.003, 0.009, 0.027, widened by 0.027)"
    close = {**inside, "runner_up": 0.009, "margin": 0.0041}  # how far ahead of the runner-up the choice was
    assert rate_text(close) == "rates tried 0.001, 0.003, 0.009 -> 0.003 (+0.004 on validation over 0.009)"
    assert rate_text({**close, **edge}) == (
        "rates tried 0.001, 0.003, 0.009 -> 0.001 (+0.004 on validation over 0.009; at the edge of what was tried)"
    )
    assert rate_text(close, short=True) == "rate 0.003 (tried 0.001, 0.003, 0.009; +0.004 over 0.009)"
