"""python -m vitlib.train as a careless user runs it: self-supervised runs print their own test metrics; options out of
range, an output folder that is a file or cannot be written, a resume with other options, a second run in a folder in
use, the leftovers of a killed run and NaN in the data each get a clear error (exit code 2, no traceback) or message
before any work, and nothing already saved is touched."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import TINY_RUN

from vitlib.data import DataError, get_dataset
from vitlib.train import NonFiniteLossError, TrainConfig, main, parse_config, train
from vitlib.train.checkpoint import read_checkpoint
from vitlib.train.config import RANGES
from vitlib.train.folder import RunFolderError

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# 128 bundled images, 4 steps of 32 an epoch: a second or two
TINY = ["--model", "ViT-Micro/7", "--subset", "128", "--batch-size", "32", "--no-progress", "--log-every", "2"]

pytestmark = pytest.mark.usefixtures("one_thread")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*TINY, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fingerprint(folder: Path) -> dict:
    """Every file of a folder (hidden ones too) with its sha256."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 1-epoch run (4 steps) in out/, made by the command line."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main([*TINY, "--epochs", "1", "--no-eval-test", "--out", str(out)]) == 0
    return out


# --------------------------------------------------------------------------------- 0. self-supervised test metrics
@pytest.mark.parametrize("objective, accuracy", [("mae", False), ("mpp", True)])
def test_self_supervised_runs_print_their_test_metrics(capsys, tmp_path, objective, accuracy):
    """Was: KeyError: 'acc' after the run had trained (MAE has no accuracy)."""
    code, out, err = cli(capsys, "--objective", objective, "--steps", "2", "--out", str(tmp_path / objective))
    assert code == 0, err
    line = out.strip().splitlines()[-1]
    assert line.startswith("test: loss ") and line.endswith("(2000 images)"), line
    assert (" acc " in line) == accuracy, line
    test = json.loads((tmp_path / objective / "test.json").read_text())
    assert f"loss {test['loss']:.4f}" in line and ("acc" in test) == accuracy


def test_the_token_objective_from_the_command_line_says_what_it_needs(capsys):
    code, _, err = cli(capsys, "--objective", "token", "--steps", "1")
    assert code == 2 and "error: objective 'token' needs a trained teacher" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------ 1. options out of range
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--log-every", "0"], "log_every must be at least 1 (steps between progress updates), got 0 (--log-every)"),
        (
            ["--image-size", "-28"],
            "image_size must be a positive number of pixels (or none: the data set's own), got -28 (--image-size)",
        ),
        (["--image-size", "0"], "image_size must be a positive number of pixels (or none: the data set's own), got 0"),
        (
            ["--val-fraction", "1.5"],
            "val_fraction must be in [0, 1) (0: no validation split), got 1.5 (--val-fraction)",
        ),
        (["--lr", "nan"], "lr must be a number, positive; got nan (--lr)"),
        (["--min-lr", "0.1", "--lr", "0.01"], "min_lr (0.1) is above lr (0.01)"),
        (["--subset", "1.5"], "subset (1.5) must be a fraction in (0, 1] or a whole number"),
        (["--ema", "1"], "ema must be 0 (off) or a decay in (0, 1), got 1.0 (--ema)"),
        (["--allow-change", "lr", "--resume"], "only epochs, steps, precision may change on resume"),
    ],
)
def test_options_out_of_range_are_errors_before_any_work(capsys, tmp_path, argv, message):
    out = tmp_path / "run"
    code, _, err = cli(capsys, *argv, "--out", str(out))
    assert code == 2
    assert err.startswith("error: ") and message in err and "Traceback" not in err, err
    assert not out.exists()  # refused before anything was written
    # the Python API gives the same error
    with pytest.raises(ValueError, match=re.escape(message)):  # made (one option) or trained (how they combine)
        train(parse_config([*TINY, *argv, "--out", str(out)]))
    assert not out.exists()


BAD = {  # one value out of range for every numeric option
    "epochs": 0,
    "steps": -1,
    "batch_size": 0,
    "lr": 0.0,
    "min_lr": -1e-5,
    "weight_decay": -0.1,
    "beta1": 1.0,
    "beta2": -0.5,
    "warmup_epochs": -1.0,
    "grad_clip": -1.0,
    "label_smoothing": 1.0,
    "mixup": -0.2,
    "cutmix": float("inf"),
    "ema": 1.5,
    "seed": -1,
    "subset": 0.0,
    "val_fraction": 1.0,
    "image_size": 0,
    "num_workers": -1,
    "dropout": 1.0,
    "drop_path": -0.1,
    "checkpoint_every": -5,
    "time_budget": -1.0,
    "log_every": 0,
    "eval_every": -1,
    "patience": -1,
    "lr_drops": -1,
    "momentum": 1.0,
}


def test_every_numeric_option_has_a_range():
    numeric = [f.name for f in dataclasses.fields(TrainConfig) if any(t in str(f.type) for t in ("int", "float"))]
    assert sorted(numeric) == sorted(RANGES) == sorted(BAD)
    for name, value in BAD.items():
        with pytest.raises(ValueError, match=f"^{name} "):
            TrainConfig(**{name: value})
    with pytest.raises(ValueError, match="epochs must be a whole number, at least 1; got 2.5"):
        TrainConfig(epochs=2.5)


def test_an_output_folder_that_is_a_file_or_cannot_be_made_is_refused(capsys, tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("my notes")
    code, _, err = cli(capsys, "--out", str(afile))
    assert code == 2 and f"error: out='{afile}' is an existing file, not a folder" in err, err
    code, _, err = cli(capsys, "--out", str(afile / "run"))
    assert code == 2 and f"cannot be created: {afile} is a file, not a folder" in err, err
    assert afile.read_text() == "my notes"
    code, _, err = cli(capsys, "--out", "/proc/vitlib-test/run")  # even root cannot create folders in /proc
    assert code == 2 and "cannot create the output folder /proc/vitlib-test/run" in err and "Errno" not in err, err
    with pytest.raises(RunFolderError, match="existing file"):
        train(dataclasses.replace(TINY_RUN, out=str(afile)))


# ---------------------------------------------------------------------------------- 2. resume with other options
def test_resume_differences_are_named_and_nothing_is_overwritten(capsys, finished):
    before = fingerprint(finished)
    argv = ["--epochs", "1", "--no-eval-test", "--out", str(finished), "--resume"]
    code, _, err = cli(capsys, *argv, "--batch-size", "16", "--lr", "0.01", "--seed", "3", "--dataset", "mnist")
    assert code == 2 and "Traceback" not in err
    assert f"error: {finished}/checkpoint.safetensors was written for another model or data set: " in err, err
    for text in ("batch_size 32 (checkpoint) vs 16 (now)", "lr 0.001 (checkpoint) vs 0.01 (now)", "seed 0 (ch"):
        assert text in err, err
    assert "dataset 'fashion-mnist-mini' (checkpoint) vs 'mnist' (now)" in err and "Nothing was changed" in err
    code, _, err = cli(capsys, *argv, "--schedule", "linear", "--warmup-epochs", "0.5")
    assert code == 2 and "written by a run with other options: " in err and "schedule 'cosine'" in err, err
    assert "--allow-change" not in err  # the schedule cannot be allowed to change
    code, _, err = cli(capsys, *[a if a != "1" else "2" for a in argv])  # more epochs, not allowed explicitly
    assert code == 2 and "epochs 1 (checkpoint) vs 2 (now)" in err and "add --allow-change epochs" in err, err
    assert fingerprint(finished) == before  # checkpoint, config.json, metrics: untouched


def test_allow_change_lets_a_run_go_on_for_longer_and_records_it(capsys, tmp_path, finished):
    out = tmp_path / "longer"
    shutil.copytree(finished, out)
    code, _, err = cli(
        capsys, "--epochs", "2", "--no-eval-test", "--out", str(out), "--resume", "--allow-change", "epochs"
    )
    assert code == 0, err
    assert "with epochs 1 -> 2 (allow_change)" in err
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["epochs"] == 2 and config["config_changes"] == [
        {"at_step": 4, "changes": {"epochs": [1, 2]}}
    ]
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert meta["progress"]["global_step"] == 8 and meta["config_changes"] == config["config_changes"]
    # resuming the longer run again with its new options needs nothing more
    code, _, err = cli(capsys, "--epochs", "2", "--no-eval-test", "--out", str(out), "--resume")
    assert code == 0, err


# ------------------------------------------------------------------------------------- 4. one run per folder
def test_a_second_run_in_a_folder_in_use_is_refused(capsys, tmp_path):
    """Was: both runs reported success and the first run's files were lost."""
    out = tmp_path / "shared"
    first = subprocess.Popen(
        [sys.executable, "-m", "vitlib.train", *TINY, "--subset", "1024", "--epochs", "3", "--no-eval-test"]
        + ["--out", str(out)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (out / ".lock").exists() and first.poll() is None:
            time.sleep(0.01)
        for extra in ([], ["--resume"]):
            code, _, err = cli(capsys, "--epochs", "3", "--no-eval-test", "--out", str(out), *extra)
            assert code == 2, err
            assert f"error: {out} is in use by another run (pid {first.pid}" in err, err
            assert (
                f"Wait for it to finish or choose another out folder. If no run uses it any more, delete {out}/.lock"
                in err
            )
    finally:
        assert first.wait(timeout=300) == 0, first.stderr.read()[-3000:]
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert meta["progress"]["global_step"] == 3 * 32 and (out / "model.safetensors").exists()
    assert not (out / ".lock").exists()  # released at the end


def test_a_stale_lock_is_taken_over_and_the_lock_is_released_after_an_error(capsys, tmp_path):
    out = tmp_path / "stale"
    out.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)  # a process that has ended
    (out / ".lock").write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
    code, _, err = cli(capsys, "--steps", "1", "--no-eval-test", "--out", str(out))
    assert code == 0, err
    assert f"took over the lock {out}/.lock of process {pid}, which is no longer running" in err
    assert not (out / ".lock").exists()
    # a run refused after it took the lock (here: a resume with another lr) releases it too
    code, _, err = cli(capsys, "--steps", "1", "--no-eval-test", "--out", str(out), "--resume", "--lr", "0.01")
    assert code == 2 and "lr 0.001 (checkpoint) vs 0.01 (now)" in err and not (out / ".lock").exists()


def test_the_lock_is_released_when_training_fails(tmp_path):
    from test_train import NaNNet

    cfg = dataclasses.replace(TINY_RUN, out=str(tmp_path / "nan"), epochs=1, log_every=1)
    with pytest.raises(NonFiniteLossError):
        train(cfg, model=NaNNet())
    assert not (tmp_path / "nan" / ".lock").exists()
    assert sorted(p.name for p in (tmp_path / "nan").iterdir()) == ["config.json"]  # no checkpoint of NaN weights


# ----------------------------------------------------------------------------- 5. temporaries of a killed run
KILLED_WHILE_SAVING = """
import os, signal, sys
import vitlib.train.checkpoint as ckpt

def save_file(tensors, filename, metadata=None):  # half the file written, then the process is killed
    with open(filename, "wb") as f:
        f.write(b"\\0" * 100_000)
        f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

ckpt.save_file = save_file
from vitlib.train import main
main(sys.argv[1:])
"""


def test_the_temporary_file_of_a_run_killed_while_saving_is_removed_on_the_next_start(capsys, tmp_path):
    out = tmp_path / "killed"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WHILE_SAVING, *TINY, "--epochs", "1", "--out", str(out)],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    leftovers = sorted(p.name for p in out.iterdir())
    assert ".lock" in leftovers and "checkpoint.safetensors" not in leftovers, leftovers  # killed in its first save
    tmp = next(name for name in leftovers if name.startswith(".checkpoint.safetensors.tmp-"))
    pid = int(tmp.rsplit("-", 1)[1])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    alive = out / f".metrics.csv.tmp-{sleeper.pid}"  # of a process that still runs: not touched
    alive.write_text("in progress")
    try:
        code, _, err = cli(capsys, "--epochs", "1", "--no-eval-test", "--out", str(out))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert code == 0, err
    assert f"removed {out / tmp} (97.7 KB), a temporary file left by process {pid}, which is no" in err, err
    assert "which is no longer running" in err and "took over the lock" in err
    assert not (out / tmp).exists() and alive.exists()
    assert (out / "checkpoint.safetensors").exists() and not (out / ".lock").exists()


# ------------------------------------------------------------------------------------------------ 6. NaN in data
@pytest.fixture(scope="module")
def float_data():
    """The bundled subset with float images in [0, 255] (what a user who built their own tensors may have)."""
    data = get_dataset("fashion-mnist-mini", subset=128, seed=0)

    def as_float(split):
        return dataclasses.replace(split, images=split.images.float())

    return dataclasses.replace(data, train=as_float(data.train), val=as_float(data.val), test=as_float(data.test))


@pytest.mark.parametrize("split, indices", [("train", [5]), ("test", [17, 40, 1999]), ("val", [0, 1])])
def test_nan_in_the_data_is_found_when_it_is_loaded(tmp_path, float_data, split, indices):
    """Was: NaN in the training images said 'lower the learning rate'; NaN in the test images became an accuracy."""
    images = getattr(float_data, split).images.clone()
    images[indices[0], 0, 3, 3] = float("nan")
    for i in indices[1:]:
        images[i, 0, 0, 0] = float("inf")
    data = dataclasses.replace(float_data, **{split: dataclasses.replace(getattr(float_data, split), images=images)})
    n = len(indices)
    what = "split (held out of the training images)" if split == "val" else "split"
    message = (
        f"the {split} {what} of 'fashion-mnist-mini' has {n} image{'s' * (n > 1)} of {len(images)} with NaN/inf "
        f"values (first at index {indices[0]}): clean the data or drop those images"
    )
    cfg = dataclasses.replace(TINY_RUN, out=str(tmp_path / "nan"))
    with pytest.raises(DataError) as err:
        train(cfg, data=data)
    assert str(err.value).startswith(message), str(err.value)
    assert not (tmp_path / "nan").exists()  # refused before the run wrote anything (its lock folder is gone too)
    train(dataclasses.replace(cfg, epochs=1, out=None), data=float_data)  # the clean float data trains
    assert torch.isfinite(float_data.test.images).all()
