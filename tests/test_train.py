"""vitlib.train: the training engine keeps its promises. Runs are reproducible from the seed, they learn, they write
their outputs, they refuse to overwrite, a run killed mid-way and resumed ends with the same weights bit for bit, and
the guards (non-finite loss, time budget, bad options) stop it cleanly with a message that says what happened."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import TINY_RUN
from safetensors.torch import load_file
from torch import nn

from vitlib.data import get_dataset
from vitlib.model.cnn import SmallResNet, create_cnn
from vitlib.train import NonFiniteLossError, TrainConfig, evaluate, main, make_loader, parse_config, train
from vitlib.train.checkpoint import CheckpointError, read_checkpoint

ROOT = Path(__file__).resolve().parent.parent
# ViT-Micro with 7x7 patches (16 tokens): 8 steps of 64 images per epoch, a few seconds a run on 2 CPU cores
BASE = TINY_RUN
CLOCKS = ("time_s", "images_per_s")  # the only columns that may differ between two runs


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest.one_thread


def without_clocks(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in CLOCKS} for row in rows]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return without_clocks(list(csv.DictReader(f)))


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs (max |diff| {(a[k].float() - b[k].float()).abs().max():.3g})"


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """One finished run with out/ (2 epochs, test set evaluated at the end): shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("first") / "run"
    cfg = dataclasses.replace(BASE, out=str(out), eval_test=True)
    return cfg, train(cfg)


# ------------------------------------------------------------------------------------------ reproducible, learns
def test_the_same_seed_gives_the_same_run(first):
    cfg, a = first
    b = train(dataclasses.replace(cfg, out=None))
    assert len(a.history) == 2 and len(a.steps) == 4
    assert without_clocks(a.history) == without_clocks(b.history)
    assert without_clocks(a.steps) == without_clocks(b.steps)
    assert_same_weights(a.model.state_dict(), b.model.state_dict())


def test_another_seed_gives_another_run(first):
    cfg, a = first
    c = train(dataclasses.replace(cfg, out=None, seed=1, epochs=1))
    assert c.history[0]["train_loss"] != a.history[0]["train_loss"]
    assert not torch.equal(c.model.patch_embed.proj.weight, a.model.patch_embed.proj.weight)


def test_training_learns(first):
    _, a = first
    # measured: validation accuracy 0.40-0.46 after 2 epochs for seeds 0-3; chance is 0.10
    assert a.history[-1]["val_acc"] > 0.3
    assert a.history[1]["train_loss"] < a.history[0]["train_loss"] < 2.31  # below log(10), and falling
    assert a.test["n"] == 2000 and a.test["acc"] > 0.3
    assert a.steps[0]["lr"] == pytest.approx(3e-3) and a.history[-1]["lr"] == pytest.approx(1e-5)  # warm-up, decay


def test_the_output_folder(first):
    cfg, a = first
    out = Path(cfg.out)
    for name in ("metrics.csv", "steps.csv", "config.json", "checkpoint.safetensors", "model.safetensors", "test.json"):
        assert (out / name).is_file(), name
    assert read_csv(out / "metrics.csv") == [{k: str(v) for k, v in row.items()} for row in without_clocks(a.history)]
    assert len(read_csv(out / "steps.csv")) == 4
    config = json.loads((out / "config.json").read_text())
    assert config["train"] == dataclasses.asdict(cfg) and config["model"]["dim"] == 64
    assert json.loads((out / "test.json").read_text()) == a.test
    assert_same_weights(load_file(out / "model.safetensors"), a.model.state_dict())
    tensors, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert meta["progress"]["global_step"] == 16 and meta["progress"]["epoch"] == 2
    assert without_clocks(meta["history"]) == without_clocks(a.history)


def test_an_existing_run_is_never_overwritten(first):
    cfg, _ = first
    out = Path(cfg.out)
    before = {
        name: sha(out / name) for name in ("checkpoint.safetensors", "metrics.csv", "model.safetensors", "config.json")
    }
    with pytest.raises(FileExistsError, match="resume"):
        train(cfg)
    with pytest.raises(CheckpointError, match="another model"):  # resuming with another architecture
        train(dataclasses.replace(cfg, model="ViT-Micro/4", resume=True))
    assert before == {name: sha(out / name) for name in before}


def test_resuming_a_finished_run_does_no_more_steps(first):
    cfg, a = first
    out = Path(cfg.out)
    ckpt = sha(out / "checkpoint.safetensors")
    r = train(dataclasses.replace(cfg, resume=True))
    assert sha(out / "checkpoint.safetensors") == ckpt  # no step, no new checkpoint
    assert without_clocks(r.history) == without_clocks(a.history) and len(r.steps) == len(a.steps)
    assert_same_weights(r.model.state_dict(), a.model.state_dict())
    assert r.test == a.test


def test_resume_without_a_checkpoint_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(dataclasses.replace(BASE, out=str(tmp_path / "empty"), resume=True))
    with pytest.raises(ValueError, match="out="):
        train(dataclasses.replace(BASE, resume=True))


# ------------------------------------------------------------------------------------- killed and resumed (CLI)
def cli(out: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vitlib.train",
        "--model",
        "ViT-Micro/7",
        "--subset",
        "512",
        "--batch-size",
        "32",
        "--val-fraction",
        "0.05",
        "--no-eval-test",
        "--no-progress",
        "--lr",
        "3e-3",
        "--log-every",
        "4",
        "--checkpoint-every",
        "5",
        "--out",
        str(out),
        *options,
    ]


# one thread per process: A and B run side by side on 2 cores (two 2-thread OpenMP processes slow each other ~8x)
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_cli(command: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize(
    "options",
    [["--epochs", "3"], ["--epochs", "2", "--augment", "crop-flip", "--mixup", "0.8", "--dropout", "0.1"]],
    ids=["plain", "augment-mixup-dropout"],
)
def test_a_killed_run_resumes_bit_for_bit(tmp_path, options):
    """A runs uninterrupted; B is the same command killed with SIGKILL right after its first checkpoint (step 5 of 16,
    mid-epoch), then resumed: the final weights and every logged metric must be the same."""
    a_out, b_out = tmp_path / "A", tmp_path / "B"
    start = lambda out: subprocess.Popen(
        cli(out, *options), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    a, b = start(a_out), start(b_out)
    ckpt = b_out / "checkpoint.safetensors"
    deadline = time.monotonic() + 240
    while not ckpt.exists() and b.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    if b.poll() is None:
        os.kill(b.pid, signal.SIGKILL)
    assert b.wait(timeout=60) == -signal.SIGKILL, b.stderr.read()[-3000:]
    assert a.wait(timeout=300) == 0, a.stderr.read()[-3000:]
    epochs = int(options[1])
    _, meta = read_checkpoint(ckpt)
    assert 0 < meta["progress"]["global_step"] < 16 * epochs, "B was not killed mid-run"
    assert not (b_out / "model.safetensors").exists()
    run_cli(cli(b_out, *options, "--resume"))

    assert_same_weights(load_file(a_out / "model.safetensors"), load_file(b_out / "model.safetensors"))
    assert read_csv(a_out / "metrics.csv") == read_csv(b_out / "metrics.csv")
    assert len(read_csv(a_out / "metrics.csv")) == epochs
    assert read_csv(a_out / "steps.csv") == read_csv(b_out / "steps.csv")
    a_tensors, a_meta = read_checkpoint(a_out / "checkpoint.safetensors")
    b_tensors, b_meta = read_checkpoint(b_out / "checkpoint.safetensors")
    assert_same_weights(a_tensors, b_tensors)  # optimiser moments and RNG state too
    assert a_meta["progress"] == b_meta["progress"] and a_meta["scheduler"] == b_meta["scheduler"]


# ------------------------------------------------------------------------------------------------------- guards
class NaNNet(nn.Module):
    """A model whose forward pass returns NaN logits (from the first step on)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(28 * 28, 10)

    def forward(self, x):
        return self.fc(x.flatten(1)) * float("nan")


def test_a_nan_loss_stops_the_run_naming_the_step(tmp_path):
    cfg = dataclasses.replace(BASE, out=str(tmp_path / "nan"), epochs=1, log_every=100, checkpoint_every=1)
    with pytest.raises(NonFiniteLossError, match=r"at step 1 \(epoch 1\)") as err:
        train(cfg, model=NaNNet())
    assert "no checkpoint was written" in str(err.value)
    # checkpoints are never written from a run whose loss went non-finite
    assert not (tmp_path / "nan" / "checkpoint.safetensors").exists()


def test_a_huge_learning_rate_diverges_into_a_clear_error(tmp_path):
    cfg = dataclasses.replace(BASE, out=str(tmp_path / "huge"), epochs=1, lr=1e6, checkpoint_every=2, log_every=100)
    with pytest.raises(NonFiniteLossError, match=r"non-finite at step \d+ \(epoch 1\).*Lower lr") as err:
        train(cfg)
    step = int(str(err.value).split("at step ")[1].split()[0])
    ckpt = tmp_path / "huge" / "checkpoint.safetensors"
    assert ckpt.exists() == (step > 2)  # measured: step 3; the checkpoint of step 2 was taken before it went bad
    if ckpt.exists():
        tensors, meta = read_checkpoint(ckpt)
        assert meta["progress"]["global_step"] < step
        assert all(torch.isfinite(v).all() for k, v in tensors.items() if k.startswith("model."))
        assert str(ckpt) in str(err.value)


class InfGrad(NaNNet):
    """Finite logits, but an infinite gradient: the weights turn NaN in the first update, the loss only after it."""

    def __init__(self):
        super().__init__()
        self.fc.weight.register_hook(lambda grad: grad * float("inf"))

    def forward(self, x):
        return self.fc(x.flatten(1))


def test_non_finite_weights_are_never_checkpointed(tmp_path):
    cfg = dataclasses.replace(BASE, out=str(tmp_path / "inf"), epochs=1, log_every=100, checkpoint_every=1, grad_clip=0)
    with pytest.raises(NonFiniteLossError, match=r"weights became non-finite by step 1 \(epoch 1\)"):
        train(cfg, model=InfGrad())
    assert not (tmp_path / "inf" / "checkpoint.safetensors").exists()


def test_a_time_budget_stops_cleanly_with_a_checkpoint(tmp_path):
    out = tmp_path / "budget"
    r = train(dataclasses.replace(BASE, out=str(out), epochs=1, time_budget=1e-4, eval_test=True))
    assert "time budget" in r.stopped and "epoch 1, step" in r.stopped
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert 0 < meta["progress"]["step_in_epoch"] < 8 and meta["progress"]["epoch"] == 0
    assert r.test is None and not (out / "test.json").exists()  # not evaluated: the run is not finished
    done = train(dataclasses.replace(BASE, out=str(out), epochs=1, resume=True))
    assert done.stopped == "done" and len(done.history) == 1
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert meta["progress"]["global_step"] == 8


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("schedule", "foo", "unknown schedule"),
        ("augment", "bar", "unknown augment"),
        ("precision", "x", "unknown precision"),
        ("head", "conv", "unknown head"),
        ("epochs", 0, "epochs must be"),
        ("batch_size", 0, "batch_size must be"),
        ("lr", 0.0, "lr must be positive"),
    ],
)
def test_bad_options_are_value_errors(option, value, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        train(dataclasses.replace(BASE, out=str(tmp_path / "bad"), **{option: value}))
    assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_a_batch_larger_than_the_training_set_is_a_value_error():
    with pytest.raises(ValueError, match="smaller than one batch"):
        train(dataclasses.replace(BASE, subset=50, batch_size=64))


# ------------------------------------------------------------------------------------------------- command line
def test_cli_unknown_option_exits_with_code_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--epochs", "1", "--learning-rate", "0.1"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --learning-rate" in capsys.readouterr().err


def test_cli_reports_bad_values_with_code_2(capsys):
    assert main(["--epochs", "0", "--no-progress"]) == 2
    assert "error: epochs must be at least 1" in capsys.readouterr().err
    assert main(["--dataset", "imagenet-21k", "--no-progress"]) == 2
    assert "unknown data set 'imagenet-21k'" in capsys.readouterr().err


def test_cli_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    fields = dataclasses.fields(TrainConfig)
    for f in fields:
        assert "--" + f.name.replace("_", "-") in text, f.name
        assert " ".join(f.metadata["help"].split())[:30] in text, f.name


def test_cli_parses_into_the_config():
    cfg = parse_config(
        [
            "--subset",
            "512",
            "--image-size",
            "none",
            "--dropout",
            "0.1",
            "--no-progress",
            "--resume",
            "--out",
            "runs/x",
            "--pos-embed",
            "sincos2d",
            "--time-budget",
            "1.5",
        ]
    )
    assert cfg.subset == 512 and cfg.image_size is None and cfg.dropout == 0.1 and cfg.pos_embed == "sincos2d"
    assert cfg.progress is False and cfg.resume is True and cfg.time_budget == 1.5
    assert (
        dataclasses.replace(
            cfg, subset=None, dropout=None, progress=True, resume=False, out=None, pos_embed=None, time_budget=0.0
        )
        == TrainConfig()
    )  # everything else at its default


# -------------------------------------------------------------------------------------------------- CNN baseline
def test_the_cnn_baseline_trains_in_the_same_loop(tmp_path):
    cfg = dataclasses.replace(
        BASE, model="ResNet-8", subset=128, batch_size=32, epochs=1, val_fraction=0.02, out=str(tmp_path / "cnn")
    )
    model = create_cnn("ResNet-8", num_classes=10, in_channels=1)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    r = train(cfg, model=model)
    assert isinstance(r.model, SmallResNet) and r.model.config["in_channels"] == 1
    assert len(r.history) == 1 and 0 <= r.history[0]["val_acc"] <= 1
    assert torch.isfinite(torch.tensor(r.history[0]["train_loss"]))
    weights = load_file(tmp_path / "cnn" / "model.safetensors")
    assert_same_weights(weights, r.model.state_dict())
    assert not torch.equal(weights["stem.0.weight"], initial["stem.0.weight"])  # it trained
    assert int(weights["stem.1.num_batches_tracked"]) == 4  # 4 steps, BatchNorm in train mode


def test_early_stopping_keeps_the_best_validation_weights(tmp_path):
    cfg = dataclasses.replace(BASE, epochs=12, lr=3e-2, patience=2, eval_test=True, out=str(tmp_path / "es"))
    r = train(cfg)
    accs = [row["val_acc"] for row in r.history]
    best = max(range(len(accs)), key=lambda i: (accs[i], -i))  # the first epoch with the best accuracy
    assert r.best_epoch == best + 1 and len(accs) <= r.best_epoch + 2
    if len(accs) < 12:
        assert r.stopped.startswith("early stopping after epoch")
    saved = load_file(tmp_path / "es" / "model.safetensors")
    data = get_dataset("fashion-mnist-mini", subset=512, seed=0)
    ev = evaluate(r.model.eval(), make_loader(data.val, data, cfg, False, torch.device("cpu")))
    assert ev["acc"] == pytest.approx(accs[best])  # the kept weights are the best epoch's, and they were saved
    assert all(torch.equal(saved[k], v) for k, v in r.model.state_dict().items())
    with pytest.raises(ValueError, match="patience .* cannot be combined with resume"):
        train(dataclasses.replace(cfg, resume=True))
    with pytest.raises(ValueError, match="validation split"):
        train(dataclasses.replace(cfg, val_fraction=0.0, out=None))
