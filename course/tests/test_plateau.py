"""A run that ends when it stops learning: schedule='plateau' (constant rate, tenfold drops at each stall, the stall
after the last drop ends the run), and what train_to_plateau and run_fractions record about why a run stopped."""

import pytest

from course.datasize import run_fractions, train_to_plateau
from course.experiments import Experiment
from vitlib import create_model
from vitlib.data import get_dataset, subset
from vitlib.train import TrainConfig, train

BASE = dict(
    dataset="fashion-mnist-mini",
    model="ViT-Micro/7",
    batch_size=64,
    subset=256,
    warmup_epochs=0,
    progress=False,
    eval_test=False,
)


def test_each_stall_drops_the_rate_tenfold_and_the_last_one_ends_the_run(one_thread):
    # a rate so small that the weights cannot change the validation accuracy: every evaluation after the first stalls
    cfg = TrainConfig(**BASE, lr=1e-12, min_lr=0, epochs=30, schedule="plateau", patience=1, lr_drops=2)
    result = train(cfg)
    lrs = [row["lr"] for row in result.history]
    assert len(result.history) == 4  # epoch 1 best, 2 stalls (drop), 3 stalls (drop), 4 stalls: the end
    assert lrs[1] == pytest.approx(lrs[0] * 0.1) and lrs[2] == pytest.approx(lrs[0] * 0.01)
    assert result.stopped.startswith("early stopping after epoch 4") and "2 tenfold drop(s)" in result.stopped


def test_a_learning_run_keeps_its_rate_and_plateau_needs_patience(one_thread):
    cfg = TrainConfig(**BASE, lr=3e-3, epochs=3, schedule="plateau", patience=5)
    result = train(cfg)
    assert {row["lr"] for row in result.history} == {3e-3} and result.stopped == "done"
    with pytest.raises(ValueError, match="patience"):
        train(TrainConfig(**BASE, schedule="plateau"))
    with pytest.raises(ValueError, match="lr_drops"):
        TrainConfig(**BASE, schedule="plateau", patience=2, lr_drops=-1)


def test_train_to_plateau_says_why_it_stopped(one_thread):
    data = get_dataset("fashion-mnist-mini")
    small = data.__class__(**{**data.__dict__, "train": subset(data.train, 200, seed=0)})
    model = lambda: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)  # noqa: E731
    budget = train_to_plateau(
        TrainConfig(steps=6, batch_size=50, patience=50, progress=False), model(), small, evaluations=3
    )
    assert budget.stopped == "budget" and budget.steps == 6
    assert 0 <= budget.final_train_acc <= 1 and budget.final_val_acc == budget.final_val_acc  # a number, not nan
    assert 1 <= budget.best_step <= budget.steps
    stalled = train_to_plateau(
        TrainConfig(steps=400, batch_size=50, lr=1e-12, min_lr=0, patience=1, progress=False),
        model(),
        small,
        evaluations=100,
    )
    assert stalled.stopped == "plateau" and stalled.steps < 400


def test_a_comparison_whose_runs_hit_their_budget_is_not_evidence():
    exp = Experiment("budget")
    for cond, base, stopped in (("a", 0.80, "budget"), ("b", 0.70, "budget")):
        exp.run(
            cond,
            lambda s, base=base, stopped=stopped: {"test_acc": base + 0.001 * s, "stopped": stopped},
            seeds=range(5),
        )
    judged = exp.compare("a", "b")
    assert judged["verdict"] == "inconclusive" and judged["hit_budget"] == [10, 10]
    row = exp.claim("b1", judged)
    assert row["why"].startswith("not converged: 10 of 10 runs hit their step budget")
    exp.rows = [{**r, "stopped": "plateau"} for r in exp.rows]
    assert exp.compare("a", "b")["verdict"] == "reproduced"


def test_run_fractions_rows_record_the_stop():
    data = get_dataset("fashion-mnist-mini")
    exp = Experiment("fractions")
    cfg = TrainConfig(steps=4, batch_size=50, patience=3, progress=False)
    rows = run_fractions(
        exp,
        {"ViT": lambda s: create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)},
        data,
        [0.05],
        [0],
        cfg,
        evaluations=2,
    )
    assert rows[0]["stopped"] in ("plateau", "budget") and "final_val_acc" in rows[0] and rows[0]["best_step"] >= 1


def test_experiment_train_records_why_a_run_with_a_stopping_rule_stopped(one_thread):
    exp = Experiment("stops")
    stalls = TrainConfig(**BASE, lr=1e-12, min_lr=0, epochs=30, schedule="plateau", patience=1, lr_drops=0)
    exp.train("stalls", stalls, seeds=[0])
    exp.train("budget", TrainConfig(**BASE, lr=3e-3, epochs=1, patience=5), seeds=[0])
    exp.train("no rule", TrainConfig(**BASE, lr=3e-3, epochs=1), seeds=[0])
    stopped = {r["condition"]: r.get("stopped") for r in exp.rows}
    assert stopped == {"stalls": "plateau", "budget": "budget", "no rule": None}  # no rule: nothing to judge by


def test_a_claim_that_did_not_converge_says_what_the_interval_alone_would_say():
    exp = Experiment("budget")
    for cond, base in (("a", 0.80), ("b", 0.70)):
        exp.run(cond, lambda s, base=base: {"test_acc": base + 0.001 * s, "stopped": "budget"}, seeds=range(5))
    row = exp.claim("b1", exp.compare("a", "b"), why="a reason written for the interval's verdict")
    assert row["verdict"] == "inconclusive"
    assert row["why"] == "not converged: 10 of 10 runs hit their step budget (the interval alone: reproduced)"


def test_arms_fine_tuned_from_a_pre_training_that_hit_its_budget_are_not_evidence():
    """Fine-tuning runs that all stopped on a plateau, started from pre-trainings that mostly ran out of budget: the
    comparison counts both stages and is 'inconclusive' (not converged); with finished pre-trainings it stands."""
    exp = Experiment("upstream")
    exp.run("pretrain", lambda s: {"loss": 1.0, "stopped": "budget" if s < 3 else "plateau"}, seeds=range(5))
    for cond, base in (("a", 0.80), ("b", 0.70)):
        exp.run(cond, lambda s, base=base: {"test_acc": base + 0.001 * s, "stopped": "plateau"}, seeds=range(5))
    judged = exp.compare("a", "b", upstream=["pretrain"])
    assert judged["verdict"] == "inconclusive" and judged["hit_budget"] == [3, 15] and judged["judged"] == "reproduced"
    row = exp.claim("h1", judged)
    assert row["why"] == (
        "not converged: 3 of 15 runs hit their step budget, 3 of the 5 the arms start from (the interval alone: "
        "reproduced)"
    )
    assert exp.compare("a", "b")["verdict"] == "reproduced"  # without the pre-training: the fine-tuning alone
    exp.rows = [{**r, "stopped": "plateau"} for r in exp.rows]
    judged = exp.compare("a", "b", upstream=["pretrain"])
    assert judged["verdict"] == "reproduced" and judged["hit_budget"] == [0, 15]


def test_a_supervised_pre_training_gives_the_rows_pretrain_gives(one_thread):
    # 15 pre-trains with labels through train() and reads its rows with pretrain_rows, as pretrain does for MAE / MPP
    from course.pretrain import pretrain_rows

    cfg = TrainConfig(**BASE, lr=1e-12, min_lr=0, epochs=30, schedule="plateau", patience=1, lr_drops=1)
    result = train(cfg)
    rows = pretrain_rows(result, watched=True)
    assert [r["epoch"] for r in rows] == [r["epoch"] for r in result.history] and len(rows) == 3
    assert all({"loss", "time_s", "val_loss", "val_acc"} <= set(r) for r in rows)
    assert rows[-1]["stopped"] == "plateau" and rows[-1]["best_epoch"] == 1
    assert rows[0]["loss"] == result.history[0]["train_loss"] and "stopped" not in rows[0]
    assert "stopped" not in pretrain_rows(result, watched=False)[-1]
