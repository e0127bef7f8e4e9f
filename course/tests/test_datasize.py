"""course.datasize: stratified nested fractions, training to the plateau, the fraction sweep and the
equivariance tests."""

import dataclasses
import math

import pytest
import torch
from torch import nn

from course.datasize import (
    condition_name,
    equivariance_error,
    fraction_of,
    fraction_rates,
    gaps,
    run_fractions,
    shift,
    train_to_plateau,
    vit_token_map,
)
from course.experiments import Experiment
from vitlib import create_model
from vitlib.data import Dataset, TensorSplit
from vitlib.model.cnn import SmallResNet
from vitlib.train import TrainConfig


def tiny_data(n=200, classes=4, size=8):
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(n) % classes
    images = (torch.rand(n, 1, size, size, generator=g) * 100).to(torch.uint8)
    images[:, :, 0, :] = (labels * 60).view(-1, 1, 1).to(torch.uint8)  # the label is readable from the first row
    split = lambda k: TensorSplit(images[:k].clone(), labels[:k].clone())
    return Dataset("tiny", split(n), split(40), split(40), tuple("abcd"[:classes]), 1, size, (0.5,), (0.25,))


def test_fraction_of_is_stratified_nested_and_leaves_test_alone():
    data = tiny_data()
    small, large = fraction_of(data, 0.1, seed=3), fraction_of(data, 0.5, seed=3)
    assert len(small.train) == 20 and len(large.train) == 100
    assert torch.bincount(small.train.labels).tolist() == [5, 5, 5, 5]
    as_set = lambda s: {tuple(x.flatten().tolist()) for x in s.train.images}
    assert as_set(small) <= as_set(large)
    assert small.test is data.test and fraction_of(data, 1.0) is data
    with pytest.raises(ValueError, match="fraction must be in"):
        fraction_of(data, 0.0)


def test_train_to_plateau_stops_when_validation_stops_improving_and_keeps_the_best():
    data = tiny_data()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 4))
    cfg = TrainConfig(lr=0.05, batch_size=32, steps=3000, patience=3, device="cpu")
    r = train_to_plateau(cfg, model, data, evaluations=100)
    assert r.steps < 3000  # the first row is separable: validation accuracy saturates and the run stops early
    assert r.best_val_acc == pytest.approx(1.0) and r.test["acc"] > 0.9 and r.n_train == 200
    assert r.epochs == pytest.approx(r.steps * 32 / 200)
    with pytest.raises(ValueError, match="at least 1"):  # a budget of steps, and a patience, are needed
        train_to_plateau(dataclasses.replace(cfg, steps=0), model, data)
    with pytest.raises(ValueError, match="at least 1"):
        train_to_plateau(dataclasses.replace(cfg, patience=0), model, data)
    with pytest.raises(ValueError, match="validation split"):
        train_to_plateau(dataclasses.replace(cfg, steps=10), model, dataclasses.replace(data, val=None))


def test_train_to_plateau_is_reproducible_and_uses_a_smaller_batch_for_a_tiny_set():
    data = fraction_of(tiny_data(), 0.05, 1)  # 10 images < batch size 32
    runs = []
    for _ in range(2):
        torch.manual_seed(4)
        model = nn.Sequential(nn.Flatten(), nn.Linear(64, 4))
        cfg = TrainConfig(lr=0.01, batch_size=32, steps=20, patience=5, device="cpu", seed=4)
        runs.append(train_to_plateau(cfg, model, data))
    assert runs[0].steps == runs[1].steps and runs[0].test == runs[1].test and runs[0].epochs == runs[0].steps


def test_run_fractions_records_every_model_fraction_and_seed():
    data = tiny_data()
    exp = Experiment("ds")
    models = {
        "lin": lambda seed: nn.Sequential(nn.Flatten(), nn.Linear(64, 4)),
        "cnn": lambda seed: SmallResNet(8, 4, 1, 4),
    }
    cfg = TrainConfig(lr=0.01, batch_size=16, steps=6, patience=5, device="cpu")
    rows = run_fractions(exp, models, data, [0.1, 0.5], [0, 1], cfg, evaluations=2)
    assert len(rows) == 2 * 2 * 2
    assert exp.conditions() == [condition_name(m, f) for m in models for f in (0.1, 0.5)]
    assert exp.fields["lin 0.1"] == {"model": "lin", "fraction": 0.1, "n_train": 20, "lr": 0.01}
    assert all(r["steps"] <= 6 and r["best_epoch"] >= 1 and 0 <= r["val_acc"] <= 1 for r in rows)
    g = gaps(exp, "lin", "cnn", [0.1, 0.5])
    assert [x["fraction"] for x in g] == [0.1, 0.5]
    for x in g:  # two seeds each: Welch's se = sqrt(s_a^2/2 + s_b^2/2) = hypot(a0 - a1, b0 - b1) / 2
        (a0, a1), (b0, b1) = (exp.values(condition_name(m, x["fraction"])) for m in ("lin", "cnn"))
        assert x["gap"] == pytest.approx((a0 + a1) / 2 - (b0 + b1) / 2)
        assert x["se"] == pytest.approx(math.hypot(a0 - a1, b0 - b1) / 2)


class Pixels(nn.Module):
    """The probe reads a model's features as its head's input: here the first pixel row, or (blind) zeros."""

    def __init__(self, blind: bool = False):
        super().__init__()
        self.blind, self.head = blind, nn.Linear(8, 4)

    def forward(self, x):
        return self.head(x[:, 0, 0, :] * (0 if self.blind else 1))


def test_run_fractions_few_shot_probes_the_frozen_features():
    data, cfg = tiny_data(), TrainConfig(lr=0.01, batch_size=16, steps=6, patience=5, device="cpu")
    models = {"pixels": lambda seed: Pixels(), "blind": lambda seed: Pixels(blind=True)}
    rows = run_fractions(Experiment("s"), models, data, [0.5], [0], cfg, evaluations=2, shots=5)
    # 5 validation images per class; on the 40 test images (10 per class) the label is in the first pixel row,
    # so a linear probe of that row is always right, and one of zeros predicts a single class: 10 of 40
    assert {r["model"]: r["few_shot_acc"] for r in rows} == {"pixels": 1.0, "blind": 0.25}


def test_a_circular_conv_is_translation_equivariant_and_vit_only_for_whole_patches_without_pos_embed():
    torch.manual_seed(0)
    x = torch.randn(2, 1, 28, 28)
    conv = nn.Conv2d(1, 4, 3, padding=1, padding_mode="circular")
    assert equivariance_error(conv, x, 3, 5) < 1e-5
    assert torch.equal(shift(x, 28, 0), x)
    vit = create_model("ViT-Micro/7", 10, 28, 1, dim=32, depth=2, heads=2, mlp_dim=64, pos_embed="none").eval()
    f = lambda im: vit_token_map(vit, im)
    assert f(x).shape == (2, 32, 4, 4)
    assert equivariance_error(f, x, 7, 14, stride=7) < 1e-4  # whole patches: the tokens move along
    with_pos = create_model("ViT-Micro/7", 10, 28, 1, dim=32, depth=2, heads=2, mlp_dim=64).eval()
    assert equivariance_error(lambda im: vit_token_map(with_pos, im), x, 7, 14, stride=7) > 1e-2
    with pytest.raises(ValueError, match="multiples of 7"):
        equivariance_error(f, x, 3, 0, stride=7)


def test_each_model_and_fraction_gets_its_own_rate_chosen_on_validation():
    from course.datasize import fraction_rates

    data = tiny_data()
    models = {"lin": lambda seed: nn.Sequential(nn.Flatten(), nn.Linear(64, 4))}
    cfg = TrainConfig(lr=0.01, batch_size=16, steps=6, patience=5, device="cpu")
    rate_exp = Experiment("rates")
    chosen = fraction_rates(rate_exp, models, data, [0.1, 0.5], cfg, [1e-3, 1e-2, 1e-1], evaluations=2, widen=1)
    assert set(chosen) == {"lin 0.1", "lin 0.5"}
    for c in chosen.values():
        assert c["best"] in c["lrs"] and set(c["lrs"]) >= {1e-3, 1e-2, 1e-1} and len(c["lrs"]) <= 4
    assert {r["seed"] for r in rate_exp.rows} == {0}
    exp = Experiment("ds")
    rows = run_fractions(
        exp, models, data, [0.1, 0.5], [0, 1], cfg, evaluations=2, rates={k: v["best"] for k, v in chosen.items()}
    )
    assert {r["condition"]: r["lr"] for r in rows} == {k: v["best"] for k, v in chosen.items()}


def test_the_rate_choice_runs_are_kept_by_the_verdict_and_equal_running_them_again():
    data, cfg = tiny_data(), TrainConfig(batch_size=16, steps=6, patience=5, device="cpu")
    models = {"lin": lambda seed: nn.Sequential(nn.Flatten(), nn.Linear(64, 4))}
    chosen = fraction_rates(Experiment("r"), models, data, [0.5], cfg, [0.003, 0.03], evaluations=2, widen=0)
    assert set(chosen["lin 0.5"]["runs"]) == {0}  # the seed that chose
    kept, fresh = Experiment("kept"), Experiment("fresh")
    run_fractions(kept, models, data, [0.5], [0, 1], cfg, evaluations=2, rates=chosen)
    run_fractions(fresh, models, data, [0.5], [0, 1], cfg, evaluations=2, rates={"lin 0.5": chosen["lin 0.5"]["best"]})
    timing = ("time_s", "wall_s")
    assert [{k: v for k, v in r.items() if k not in timing} for r in kept.rows] == [
        {k: v for k, v in r.items() if k not in timing} for r in fresh.rows
    ]
    assert kept.rows[0]["wall_s"] == chosen["lin 0.5"]["runs"][0]["wall_s"]  # seed 0 was not trained again
