"""Each arm at its own learning rate: a sweep goes on past the edge of its grid until the best rate is bracketed."""

import math

import pytest

from course.experiments import Experiment
from course.sweep import bracketed_sweep, next_rate, sweep
from vitlib.train import TrainConfig

TRUE_BEST = -2.4  # log10 of the rate where this fake validation accuracy peaks


def fake_train(self, condition, cfg, seeds, data=None, model=None, **fields):
    """Experiment.train without training: validation accuracy a parabola in log10(lr), peaking at 10^TRUE_BEST."""
    acc = 1 - (math.log10(cfg.lr) - TRUE_BEST) ** 2
    return self.run(condition, lambda s: {"val_acc": acc + 1e-4 * s, "test_acc": acc}, seeds, **fields)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(Experiment, "train", fake_train)


def test_a_best_rate_at_the_edge_widens_the_grid_until_bracketed(fake):
    exp = Experiment("lr", jobs=1)
    found = bracketed_sweep(exp, "vit", TrainConfig(), [1e-5, 1e-4], seeds=[0, 1], widen=3)
    assert found["widened"] == pytest.approx([1e-3, 1e-2, 1e-1])
    assert found["best"] == pytest.approx(1e-2) and found["bracketed"]
    assert found["lrs"] == pytest.approx([1e-5, 1e-4, 1e-3, 1e-2, 1e-1])


def test_widening_stops_at_its_limit_and_says_the_best_is_not_bracketed(fake):
    found = bracketed_sweep(Experiment("lr"), "vit", TrainConfig(), [1e-5, 1e-4], seeds=[0, 1], widen=1)
    assert found["widened"] == pytest.approx([1e-3]) and found["best"] == pytest.approx(1e-3)
    assert not found["bracketed"]


def test_a_choice_says_which_rate_came_second_and_by_how_much(fake):
    found = bracketed_sweep(Experiment("lr"), "vit", TrainConfig(), [1e-3, 3e-3, 1e-2], seeds=[0, 1])
    acc = {lr: 1 - (math.log10(lr) - TRUE_BEST) ** 2 for lr in (1e-3, 1e-2)}  # 1e-2 lies nearer the peak
    assert found["best"] == pytest.approx(3e-3) and found["runner_up"] == pytest.approx(1e-2)
    expected = 1 - (math.log10(3e-3) - TRUE_BEST) ** 2 - acc[1e-2]  # seeds' offsets are the same for every rate
    assert found["margin"] == pytest.approx(expected) and found["margin"] > 0
    alone = bracketed_sweep(Experiment("one"), "vit", TrainConfig(), [1e-3], seeds=[0], widen=0)  # nothing to trail
    assert alone["best"] == pytest.approx(1e-3) and alone["runner_up"] is None and alone["margin"] is None


def test_a_bracketed_grid_is_not_widened_and_the_lower_edge_widens_down(fake):
    found = bracketed_sweep(Experiment("lr"), "vit", TrainConfig(), [1e-3, 3e-3, 1e-2], seeds=[0, 1])
    assert found["widened"] == [] and found["best"] == pytest.approx(3e-3) and found["bracketed"]
    exp = Experiment("down")
    sweep(exp, "vit", TrainConfig(), [1e-1, 1.0], seeds=[0])
    assert next_rate(exp, "vit") == pytest.approx(1e-2)  # one step of the grid's ratio below its lowest rate
    lone = Experiment("one")
    sweep(lone, "vit", TrainConfig(), [1e-3], seeds=[0])
    with pytest.raises(ValueError, match="at least two"):
        next_rate(lone, "vit")


def test_choose_rates_gives_every_arm_its_own_bracketed_rate():
    from course.sweep import choose_rates

    peaks = {"fast": -2.0, "slow": -3.6}  # log10 of each arm's best rate

    def arm(name):
        return lambda lr: lambda seed: {"val_acc": 1 - (math.log10(lr) - peaks[name]) ** 2, "test_acc": 0.5}

    exp = Experiment("rates", jobs=1)
    chosen = choose_rates(exp, {n: arm(n) for n in peaks}, [1e-3, 3e-3, 1e-2], widen=2)
    assert chosen["fast"]["best"] == pytest.approx(1e-2) and chosen["fast"]["widened"] == pytest.approx([1e-2 * 10 / 3])
    assert chosen["fast"]["bracketed"] and chosen["slow"]["bracketed"]
    assert chosen["slow"]["widened"] == pytest.approx([1e-3 / 3, 1e-3 / 9]) and chosen["slow"]["best"] == pytest.approx(
        1e-3 / 3
    )
    assert {r["seed"] for r in exp.rows} == {0}  # one seed chooses; the verdict's seeds run apart
    assert len(exp.rows) == 3 + 1 + 3 + 2
    limited = choose_rates(Experiment("r"), {"slow": arm("slow")}, [1e-2, 3e-2], widen=1)
    assert not limited["slow"]["bracketed"] and limited["slow"]["best"] == pytest.approx(1e-2 / 3)
    with pytest.raises(ValueError, match="at least two learning rates"):
        choose_rates(Experiment("r"), {"slow": arm("slow")}, [1e-2])


def test_choose_rates_takes_a_grid_per_arm_and_runs_them_in_one_batch():
    from course.sweep import choose_rates

    peaks = {"adam": -3.0, "sgd": -1.5}  # two optimisers: their best rates lie 30x apart

    def arm(name):
        return lambda lr: lambda seed: {"val_acc": 1 - (math.log10(lr) - peaks[name]) ** 2}

    grids = {"adam": [3e-4, 1e-3, 3e-3], "sgd": [0.01, 0.03, 0.1]}
    exp = Experiment("grids", jobs=1)
    batches = []
    original = exp.batch
    exp.batch = lambda: (batches.append(1), original())[1]  # count the rounds: one batch for both arms
    chosen = choose_rates(exp, {n: arm(n) for n in grids}, grids, widen=0)
    assert chosen["adam"]["lrs"] == pytest.approx(grids["adam"]) and chosen["sgd"]["lrs"] == pytest.approx(grids["sgd"])
    assert chosen["adam"]["best"] == pytest.approx(1e-3) and chosen["sgd"]["best"] == pytest.approx(0.03)
    assert len(batches) == 1 and len(exp.rows) == 6
    with pytest.raises(ValueError, match="a grid for every arm"):
        choose_rates(Experiment("r"), {n: arm(n) for n in grids}, {"adam": grids["adam"]})
    with pytest.raises(ValueError, match="at least two learning rates.*'sgd'"):
        choose_rates(Experiment("r"), {n: arm(n) for n in grids}, {"adam": grids["adam"], "sgd": [0.1]})
