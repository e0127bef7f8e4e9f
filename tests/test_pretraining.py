"""Pre-training on one pipeline: the named recipes (vitlib.train.presets) and the command line that takes them, the
self-supervised objectives run by vitlib.train (resumable like supervised runs), and transfer from a run folder
(vitlib.train.load_pretrained)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY_RUN
from safetensors.torch import load_file, save_file

from vitlib.analysis.finetune import prepare_for_finetuning
from vitlib.data import TensorLoader, get_dataset
from vitlib.model import parse_name
from vitlib.model.cnn import is_cnn_name
from vitlib.train import TrainConfig, check_config, load_pretrained, main, parse_config, train
from vitlib.train.presets import PRESETS, get_preset

ROOT = Path(__file__).resolve().parent.parent
BASE = TINY_RUN
pytestmark = pytest.mark.usefixtures("one_thread")


# ----------------------------------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_is_a_valid_config(name):
    cfg = TrainConfig.from_preset(name)
    check_config(cfg)  # raises on an unknown schedule, augmentation, objective, ...
    assert is_cnn_name(cfg.model) or parse_name(cfg.model)
    preset = get_preset(name)
    assert preset.about and preset.source and preset.measured


def test_the_paper_preset_is_table_3():
    """Table 3, ImageNet row, and appendix B.1: Adam(0.9, 0.999), batch 4096, 10k warm-up steps, linear decay,
    clip 1."""
    cfg = TrainConfig.from_preset("paper-imagenet")
    assert (cfg.model, cfg.epochs, cfg.batch_size, cfg.lr, cfg.weight_decay, cfg.dropout) == (
        "ViT-B/16",
        300,
        4096,
        3e-3,
        0.3,
        0.1,
    )
    assert (cfg.beta1, cfg.beta2, cfg.schedule, cfg.grad_clip, cfg.head, cfg.image_size) == (
        0.9,
        0.999,
        "cosine",
        1.0,
        "mlp",
        224,
    )
    assert abs(cfg.warmup_epochs * 1_281_167 / 4096 - 10_000) < 100
    deit = TrainConfig.from_preset("deit")
    assert (deit.augment, deit.mixup, deit.cutmix, deit.label_smoothing, deit.drop_path) == (
        "randaugment",
        0.8,
        1.0,
        0.1,
        0.1,
    )


def test_the_fine_tuning_preset_is_table_4_and_only_imagenet_clips_in_pre_training():
    """App. B.1.1, Table 4: SGD momentum 0.9, batch 512, no weight decay, cosine, clip 1, 384 px, 20k steps on
    ImageNet; Table 3's caption: clipping at global norm 1 for ImageNet pre-training, not ImageNet-21k."""
    cfg = TrainConfig.from_preset("paper-finetune")
    assert (cfg.optimizer, cfg.momentum, cfg.batch_size, cfg.weight_decay, cfg.schedule, cfg.grad_clip) == (
        "sgd",
        0.9,
        512,
        0.0,
        "cosine",
        1.0,
    )
    assert (cfg.image_size, cfg.steps, cfg.lr) == (384, 20_000, 0.03)
    assert TrainConfig.from_preset("paper-imagenet21k").grad_clip == 0.0
    assert TrainConfig.from_preset("paper-imagenet").grad_clip == 1.0


def test_sgd_with_momentum_trains_and_a_wrong_optimizer_is_refused():
    from vitlib.train.optim import make_optimizer

    model = torch.nn.Linear(4, 2)
    sgd, _ = make_optimizer(model, TrainConfig(optimizer="sgd", momentum=0.5, lr=0.1), torch.device("cpu"), 10, 0)
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]["momentum"] == 0.5
    adamw, _ = make_optimizer(model, TrainConfig(), torch.device("cpu"), 10, 0)
    assert isinstance(adamw, torch.optim.AdamW)
    with pytest.raises(ValueError, match="unknown optimizer 'lamb'"):
        TrainConfig(optimizer="lamb")
    with pytest.raises(ValueError, match="momentum must be in"):
        TrainConfig(optimizer="sgd", momentum=1.0)
    result = train(
        TrainConfig(
            dataset="fashion-mnist-mini",
            subset=128,
            epochs=1,
            batch_size=64,
            optimizer="sgd",
            lr=0.05,
            progress=False,
            eval_test=False,
        )
    )
    assert result.history and result.history[-1]["train_loss"] == result.history[-1]["train_loss"]  # a number


def test_explicit_options_override_a_preset():
    cfg = TrainConfig.from_preset("paper-imagenet", batch_size=512, lr=1e-3)
    assert (cfg.batch_size, cfg.lr, cfg.weight_decay) == (512, 1e-3, 0.3)
    cli = parse_config(["--preset", "paper-imagenet", "--batch-size", "512", "--lr", "1e-3", "--no-compile"])
    assert cli == dataclasses.replace(cfg, compile=False)
    assert parse_config([]) == TrainConfig()  # no preset: the plain defaults


def test_unknown_presets_and_options_are_clear_errors(capsys):
    with pytest.raises(ValueError, match="unknown preset 'paper'.*paper-imagenet"):
        TrainConfig.from_preset("paper")
    with pytest.raises(TypeError, match="unknown TrainConfig option.*learning_rate"):
        TrainConfig.from_preset("deit", learning_rate=1e-3)
    assert main(["--preset", "paper", "--no-progress"]) == 2
    assert "unknown preset 'paper'" in capsys.readouterr().err


def test_list_presets(capsys):
    assert main(["--list-presets"]) == 0
    text = capsys.readouterr().out
    for name, preset in PRESETS.items():
        assert f"{name} [{preset.hardware}]" in text


# --------------------------------------------------------------------------------- self-supervised on the pipeline
@pytest.mark.parametrize("objective", ["mae", "mpp"])
def test_self_supervised_objectives_train_through_the_engine(objective, tmp_path):
    r = train(dataclasses.replace(BASE, objective=objective, epochs=3, out=str(tmp_path / objective)))
    losses = [row["train_loss"] for row in r.history]
    assert losses[-1] < losses[0], losses
    assert ("train_acc" in r.history[0]) == (objective == "mpp")  # MAE predicts pixels: no accuracy to report
    assert ("val_acc" in r.history[0]) == (objective == "mpp") and "val_loss" in r.history[0]
    if objective == "mpp":
        assert r.history[-1]["val_acc"] > 1 / 8  # 3-bit grey levels: 8 classes
    config = json.loads((tmp_path / objective / "config.json").read_text())
    assert config["model"]["objective"] == objective and config["train"]["objective"] == objective


def test_self_supervised_runs_resume_bit_for_bit(tmp_path):
    """The hidden patches depend on (seed, epoch, step) only, so a stopped and resumed MAE run is the same run."""
    cfg = dataclasses.replace(BASE, objective="mae", epochs=1)
    whole = train(dataclasses.replace(cfg, out=str(tmp_path / "whole")))
    stopped = train(dataclasses.replace(cfg, out=str(tmp_path / "stopped"), time_budget=1e-4))
    assert "time budget" in stopped.stopped
    train(dataclasses.replace(cfg, out=str(tmp_path / "stopped"), resume=True))
    a, b = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "stopped" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert whole.history[-1]["val_loss"] == pytest.approx(json.loads(json.dumps(whole.history))[-1]["val_loss"])


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("mixup", 0.8, "mixup=0"),
        ("label_smoothing", 0.1, "label_smoothing=0"),
        ("objective", "simclr", "unknown objective"),
    ],
)
def test_self_supervised_options_that_make_no_sense_are_refused(option, value, message):
    with pytest.raises(ValueError, match=message):
        train(dataclasses.replace(BASE, **{"objective": "mae", option: value}))


def test_a_cnn_cannot_be_pre_trained_with_mae():
    with pytest.raises(ValueError, match="pre-trains a ViT"):
        train(dataclasses.replace(BASE, objective="mae", model="ResNet-8"))


# ----------------------------------------------------------------------------------------------------- transfer
@pytest.mark.parametrize("objective, head", [("classify", "mlp"), ("mae", "linear"), ("mpp", "linear")])
def test_a_run_folder_loads_back_for_fine_tuning(objective, head, tmp_path):
    out = tmp_path / objective
    r = train(dataclasses.replace(BASE, objective=objective, head=head, epochs=1, out=str(out)))
    model = load_pretrained(out)
    trained = r.model.vit if objective != "classify" else r.model
    x = torch.randn(3, 1, 28, 28)
    assert torch.equal(model.eval().forward_features(x), trained.eval().forward_features(x))
    assert (count := sum(p.numel() for p in [*model.pre_logits.parameters(), *model.head.parameters()])) == (
        64 * 64 + 64 + 64 * 10 + 10 if head == "mlp" else 0
    ), count
    ft = prepare_for_finetuning(model, num_classes=5, image_size=56)  # higher resolution, zero-initialised head
    assert ft.pos_embed.shape[1] == 1 + 8 * 8
    assert torch.equal(ft(torch.randn(2, 1, 56, 56)), torch.zeros(2, 5))


def test_load_pretrained_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pre-trained model"):
        load_pretrained(tmp_path)
    save_file({"w": torch.zeros(2)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="not written by vitlib.train"):
        load_pretrained(tmp_path)


# ---------------------------------------------------------------------------------------------------- the loader
def test_grouped_randaugment_augments_in_groups_reproducibly():
    """On a GPU RandAugment draws one op per group of images (one kernel per group, not per image); the grouping is
    the same code on the CPU when asked for, so it is tested here."""
    data = get_dataset("fashion-mnist-mini")
    kw = dict(batch_size=64, mean=data.mean, std=data.std, shuffle=True, augment="randaugment", seed=0)
    grouped = TensorLoader(data.train, randaugment_groups=8, **kw)
    a, _ = next(iter(grouped.epoch(0)))
    b, _ = next(iter(TensorLoader(data.train, randaugment_groups=8, **kw).epoch(0)))
    plain, _ = next(iter(TensorLoader(data.train, **dict(kw, augment="none")).epoch(0)))
    assert a.shape == plain.shape == (64, 1, 28, 28) and torch.equal(a, b)
    assert not torch.equal(a, plain)
    with pytest.raises(ValueError, match="randaugment_groups"):
        TensorLoader(data.train, randaugment_groups=0, **kw)


# ------------------------------------------------------------------------------------------------ the benchmark
def test_time_to_accuracy_script_writes_its_curve(tmp_path):
    out = tmp_path / "tta.json"
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/time_to_accuracy.py",
            "--dataset",
            "fashion-mnist-mini",
            "--epochs",
            "1",
            "--model",
            "ViT-Micro/7",
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["preset"] == "tta-cpu" and result["goal"] == {"minutes": 5.0, "test_acc": 0.88}
    assert len(result["curve"]) == 1 and 0.1 < result["curve"][0]["test_acc"] <= 1.0
    assert math.isclose(result["test_acc_within_goal_minutes"], result["curve"][0]["test_acc"])
    assert "goal 88.00%" in run.stdout


def test_eval_every_sets_how_often_the_run_is_evaluated():
    r = train(dataclasses.replace(BASE, epochs=3, eval_every=2))
    assert ["val_acc" in row for row in r.history] == [False, True, True]  # every 2 epochs, and after the last
    r = train(dataclasses.replace(BASE, epochs=1, eval_every=0))
    assert "val_acc" not in r.history[0] and "val_loss" not in r.history[0]
    with pytest.raises(ValueError, match="eval_every"):
        train(dataclasses.replace(BASE, eval_every=-1))


def test_a_parsed_command_line_still_makes_a_train_config():
    """--preset and --list-presets stay out of the namespace unless given: TrainConfig(**vars(args)) keeps working."""
    from vitlib.train import make_parser

    args = vars(make_parser().parse_args(["--epochs", "2", "--objective", "mae"]))
    assert "preset" not in args and "list_presets" not in args
    assert TrainConfig(**args) == TrainConfig(epochs=2, objective="mae")


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_the_vectorized_cpu_optimizer_gives_the_per_tensor_loops_numbers_bit_for_bit(optimizer):
    # make_optimizer asks for foreach kernels on a CPU (PyTorch's default there is a loop over the tensors): the
    # weights after a few steps of a small ViT, with weight decay, clipping and the schedule, must not move by one bit
    from vitlib.model import create_model
    from vitlib.train.optim import make_optimizer

    cfg = TrainConfig(optimizer=optimizer, lr=0.01, momentum=0.9, weight_decay=0.1)
    images, labels = torch.randn(16, 1, 28, 28, generator=torch.Generator().manual_seed(0)), torch.arange(16) % 10
    weights = {}
    for foreach in (True, False):
        torch.manual_seed(0)
        model = create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)
        opt, schedule = make_optimizer(model, cfg, torch.device("cpu"), 10, 2)
        assert opt.defaults["foreach"] is True
        for group in opt.param_groups:
            group["foreach"] = foreach
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(images), labels).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            schedule.step()
        weights[foreach] = [p.detach().clone() for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(weights[True], weights[False]))


def test_every_optimizer_of_the_course_asks_vectorized_for_its_kernels(monkeypatch):
    # one place decides fused (GPU) or foreach (elsewhere): train()'s optimizers and DINO's student both ask it
    from course import dino as dino_study
    from vitlib.data import TensorSplit
    from vitlib.model import create_model
    from vitlib.train import vectorized

    assert vectorized(torch.device("cpu")) == {"foreach": True}
    assert vectorized(torch.device("cuda")) == {"fused": True}
    asked = []
    real = dino_study.vectorized
    monkeypatch.setattr(dino_study, "vectorized", lambda device: asked.append(device.type) or real(device))
    images = torch.rand(32, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    data = dataclasses.replace(get_dataset("fashion-mnist-mini"), train=TensorSplit(images, torch.arange(32) % 10))
    vit = create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)
    dino_study.pretrain_dino(vit, data, TrainConfig(steps=2, batch_size=8, lr=1e-3, device="cpu"), prototypes=16)
    assert asked == ["cpu"]
