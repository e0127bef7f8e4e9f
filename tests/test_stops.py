"""Issue 60: a run stopped by SIGTERM or Ctrl-C keeps its work and resumes bit for bit; the epoch's files never run
ahead of its checkpoint; an evaluation that fails keeps the epoch's training; a non-finite validation or test loss ends
the run; a folder holding another run's results is not overwritten without --overwrite."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import TINY_RUN
from safetensors.torch import load_file
from test_train import ENV, ROOT, assert_same_weights, read_csv

import vitlib.train.loop as loop
from vitlib.train import NonFiniteLossError, Stopped, train
from vitlib.train.checkpoint import read_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")
# 64 steps of 32 images an epoch (about 1.5 s on one core): a signal right after epoch 1 lands mid-epoch 2
COMMAND = [sys.executable, "-m", "vitlib.train", "--model", "ViT-Micro/7", "--subset", "2048", "--batch-size", "32",
           "--val-fraction", "0.05", "--no-eval-test", "--no-progress", "--lr", "3e-3", "--log-every", "8",
           "--epochs", "3"]  # fmt: skip


def test_a_signal_saves_where_the_run_is_and_it_resumes_bit_for_bit(tmp_path):
    """A runs uninterrupted; B gets SIGTERM and C Ctrl-C (SIGINT) just after their first epoch: each exits 143 / 130
    with where it saved, leaves no lock, and resumed ends with A's weights, metrics and optimiser state."""
    runs = {name: tmp_path / name for name in "ABC"}
    procs = {
        name: subprocess.Popen([*COMMAND, "--out", str(out)], cwd=ROOT, env=ENV, stderr=subprocess.PIPE, text=True)
        for name, out in runs.items()
    }
    for name, sig in (("B", signal.SIGTERM), ("C", signal.SIGINT)):
        deadline = time.monotonic() + 240
        while not (runs[name] / "metrics.csv").exists() and time.monotonic() < deadline:
            time.sleep(0.002)
        procs[name].send_signal(sig)
    assert procs["A"].wait(timeout=300) == 0, procs["A"].stderr.read()[-2000:]
    for name, code, sig in (("B", 143, "SIGTERM"), ("C", 130, "SIGINT")):
        assert procs[name].wait(timeout=120) == code
        message = procs[name].stderr.read()
        assert f"error: stopped by {sig} at step " in message and "continue with --resume" in message, message
        assert "Traceback" not in message and not (runs[name] / ".lock").exists()
        _, meta = read_checkpoint(runs[name] / "checkpoint.safetensors")
        # saved where it was (after epoch 1, or part-way into epoch 2 when the signal lands later), not at the end
        assert 64 <= meta["progress"]["global_step"] < 3 * 64, meta["progress"]
        assert not (runs[name] / "model.safetensors").exists()
        done = subprocess.run([*COMMAND, "--out", str(runs[name]), "--resume"], cwd=ROOT, env=ENV, timeout=300)
        assert done.returncode == 0
        assert_same_weights(load_file(runs["A"] / "model.safetensors"), load_file(runs[name] / "model.safetensors"))
        assert read_csv(runs["A"] / "metrics.csv") == read_csv(runs[name] / "metrics.csv")
        assert read_csv(runs["A"] / "steps.csv") == read_csv(runs[name] / "steps.csv")
        assert_same_weights(
            read_checkpoint(runs["A"] / "checkpoint.safetensors")[0],
            read_checkpoint(runs[name] / "checkpoint.safetensors")[0],
        )


def test_ctrl_c_in_python_raises_stopped_after_a_checkpoint(tmp_path):
    """In a notebook Ctrl-C (interrupt the kernel) stops train() with `Stopped`, a KeyboardInterrupt, after saving;
    the signal handlers are the caller's again afterwards."""
    before = signal.getsignal(signal.SIGINT)

    def interrupt_once_training():  # after the first epoch's files: train() holds the signals by then
        deadline = time.monotonic() + 120
        while not (tmp_path / "run" / "metrics.csv").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt_once_training, daemon=True)
    sender.start()
    with pytest.raises(Stopped, match="stopped by SIGINT at step") as err:
        train(dataclasses.replace(TINY_RUN, out=str(tmp_path / "run"), epochs=200))
    sender.join()
    assert isinstance(err.value, KeyboardInterrupt) and err.value.code == 130
    assert signal.getsignal(signal.SIGINT) is before
    assert (tmp_path / "run" / "checkpoint.safetensors").exists() and not (tmp_path / "run" / ".lock").exists()


def test_the_checkpoint_is_written_before_the_epochs_metrics(tmp_path, monkeypatch):
    """A full disk at the epoch's checkpoint leaves metrics.csv at the last checkpoint, not one epoch ahead."""
    real, calls = loop.save_checkpoint, []

    def full_disk_at_epoch_2(path, *args, **kw):
        calls.append(args[4]["epoch"])
        if args[4]["epoch"] == 2:
            raise OSError(28, "No space left on device", str(path))
        return real(path, *args, **kw)

    monkeypatch.setattr(loop, "save_checkpoint", full_disk_at_epoch_2)
    out = tmp_path / "run"
    with pytest.raises(OSError, match="No space"):
        train(dataclasses.replace(TINY_RUN, out=str(out), epochs=3))
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert meta["progress"]["epoch"] == 1 and len(read_csv(out / "metrics.csv")) == 1


def test_a_failing_evaluation_keeps_the_epochs_training(tmp_path, monkeypatch):
    """An unreadable validation image at epoch 2's evaluation: the checkpoint holds epoch 2's steps; fixed, the run
    resumes, evaluates again and ends with the weights of a run that never failed."""
    out, full = tmp_path / "run", train(dataclasses.replace(TINY_RUN, out=str(tmp_path / "whole")))
    real, seen = loop._evaluate, []

    def unreadable_at_epoch_2(run, loader):
        seen.append(1)
        if len(seen) == 2:
            raise OSError(5, "Input/output error", "val/img_0042.png")
        return real(run, loader)

    monkeypatch.setattr(loop, "_evaluate", unreadable_at_epoch_2)
    with pytest.raises(OSError, match="Input/output"):
        train(dataclasses.replace(TINY_RUN, out=str(out)))
    _, meta = read_checkpoint(out / "checkpoint.safetensors")
    assert (meta["progress"]["epoch"], meta["progress"]["step_in_epoch"]) == (1, 8)
    monkeypatch.setattr(loop, "_evaluate", real)
    done = train(dataclasses.replace(TINY_RUN, out=str(out), resume=True))
    assert_same_weights(full.model.state_dict(), done.model.state_dict())
    assert read_csv(tmp_path / "whole" / "metrics.csv") == read_csv(out / "metrics.csv")


@pytest.mark.parametrize("split", ["val", "test"])
def test_a_non_finite_evaluation_loss_ends_the_run(tmp_path, monkeypatch, split):
    real = loop._evaluate

    def nan_on(run, loader):
        ev = real(run, loader)
        return {**ev, "loss": float("nan")} if loader is run.eval_loaders[split] else ev

    monkeypatch.setattr(loop, "_evaluate", nan_on)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteLossError, match=f"the {split} loss is nan after epoch"):
        train(dataclasses.replace(TINY_RUN, out=str(out), epochs=1, eval_test=True))
    assert not (out / "test.json").exists() and not (out / "model.safetensors").exists()


def test_another_runs_results_are_kept_unless_overwrite(tmp_path):
    out = tmp_path / "run"
    train(dataclasses.replace(TINY_RUN, out=str(out), epochs=1))
    (out / "checkpoint.safetensors").unlink()  # results without a checkpoint: e.g. copied from elsewhere
    before = (out / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match=r"holds another run's results \(model.safetensors, metrics.csv"):
        train(dataclasses.replace(TINY_RUN, out=str(out), epochs=1, seed=1))
    assert (out / "model.safetensors").read_bytes() == before
    again = train(dataclasses.replace(TINY_RUN, out=str(out), epochs=1, seed=1, overwrite=True))
    assert len(read_csv(out / "metrics.csv")) == 1 and again.stopped == "done"
    assert (out / "model.safetensors").read_bytes() != before
