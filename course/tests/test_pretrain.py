"""course.pretrain: self-supervised pre-training in one call, on vitlib's loop, to a plateau of the validation loss;
class_subset, the tasks of a transfer; preset_table, vitlib.train's named recipes."""

import json
from pathlib import Path

import pytest
import torch

from course.pretrain import class_subset, preset_table, pretrain
from vitlib import VisionTransformer
from vitlib.data import get_dataset
from vitlib.objectives import MAE, MaskedPatchPrediction
from vitlib.train import TrainConfig


@pytest.mark.parametrize("kind", ["masked", "mae"])
def test_pretraining_lowers_the_loss(kind, one_thread):
    data = get_dataset("fashion-mnist-mini", subset=512, seed=0)
    model = VisionTransformer(
        image_size=28, patch_size=7, in_channels=1, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64
    )
    obj = (
        MaskedPatchPrediction(model, mean=data.mean, std=data.std)
        if kind == "masked"
        else MAE(model, decoder_dim=32, decoder_depth=1)
    )
    history = pretrain(obj, data, TrainConfig(epochs=4, batch_size=64, lr=2e-3, warmup_epochs=0.5, progress=False))
    assert len(history) == 4 and history[-1]["loss"] < 0.9 * history[0]["loss"]


def tiny_mae():
    """MAE around a one-block ViT on 28x28 grey images (16 patches): an epoch of 256 images in well under a second."""
    vit_ = VisionTransformer(
        image_size=28, patch_size=7, in_channels=1, num_classes=10, dim=16, depth=1, heads=2, mlp_dim=32
    )
    return MAE(vit_, decoder_dim=16, decoder_depth=1)


def test_pretraining_to_a_plateau_of_the_validation_loss(one_thread):
    """With patience, pre-training watches the objective's loss on held-out images: with weights that cannot move it
    never improves after the first epoch, so the run ends long before its budget, on the plateau rule."""
    data = get_dataset("fashion-mnist-mini", subset=256, seed=0)
    obj = tiny_mae()
    steady = dict(lr=1e-30, min_lr=0, warmup_epochs=0)  # steps below float32's resolution: the weights never move
    cfg = TrainConfig(
        epochs=40, batch_size=64, patience=2, schedule="plateau", lr_drops=1, eval_every=1, progress=False, **steady
    )
    history = pretrain(obj, data, cfg)
    assert "val_loss" in history[0]
    assert history[-1]["stopped"] == "plateau" and history[-1]["best_epoch"] == 1
    assert len(history) == 1 + 2 * cfg.patience  # a stall lowers the rate once, the next one ends the run
    assert all(r["val_loss"] == pytest.approx(history[0]["val_loss"]) for r in history)  # the same hidden patches


def test_pretraining_with_patience_needs_a_validation_split():
    import dataclasses

    data = get_dataset("fashion-mnist-mini", subset=64, seed=0)
    data = dataclasses.replace(data, val=None)
    obj = tiny_mae()
    with pytest.raises(ValueError, match="no validation split"):
        pretrain(obj, data, TrainConfig(epochs=2, batch_size=32, patience=2, progress=False))
    history = pretrain(obj, data, TrainConfig(epochs=2, batch_size=32, progress=False))  # a fixed budget needs none
    assert len(history) == 2 and "val_loss" not in history[0] and "stopped" not in history[-1]


def test_class_subset_is_a_task_of_its_own():
    data = get_dataset("fashion-mnist-mini")
    first, second = class_subset(data, [0, 1, 2, 3, 4]), class_subset(data, [9, 5])
    assert first.num_classes == 5 and second.classes == (data.classes[9], data.classes[5])
    assert sorted(second.train.labels.unique().tolist()) == [0, 1]
    ankle = data.train.images[data.train.labels == 9]
    assert torch.equal(second.train.images[second.train.labels == 0], ankle)  # relabelled in the order given
    assert len(first.test) + len(class_subset(data, [5, 6, 7, 8, 9]).test) == len(data.test)
    with pytest.raises(ValueError, match="distinct class indices in 0..9"):
        class_subset(data, [1, 1])


def test_unmeasured_presets_say_so():
    root = Path(__file__).resolve().parents[2]
    rows = {r["preset"]: r for r in preset_table()}
    assert rows["cifar10-15min"]["measured"].startswith("not measured")
    gpu = json.loads((root / "results" / "gpu" / "tta_fmnist_5min.json").read_text())  # measured on one H100
    assert f"{gpu['test_acc_within_goal_minutes']:.2%}" in rows["fmnist-5min"]["measured"]
    assert gpu["device"] in ("NVIDIA H100 80GB HBM3",) and "H100" in rows["fmnist-5min"]["measured"]
    assert "88.47%" in rows["tta-cpu"]["measured"]  # benchmarks/README.md, results/tta_cpu.json
    assert json.loads((root / "results" / "tta_cpu.json").read_text())["curve"][-1]["test_acc"] == pytest.approx(0.8847)
