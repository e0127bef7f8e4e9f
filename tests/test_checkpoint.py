"""vitlib.train.checkpoint: one safetensors file restores model, optimiser, scheduler and RNG states exactly; it is
written atomically; a corrupt file or one for another model is refused with a CheckpointError and left as it is."""

from __future__ import annotations

import hashlib
import random

import pytest
import torch
from safetensors.torch import save_file

import vitlib.train.checkpoint as ckpt
from vitlib import create_model
from vitlib.train.checkpoint import CheckpointError, load_checkpoint, read_checkpoint, save_checkpoint

TINY = dict(num_classes=5, image_size=16, in_channels=1, dim=16, depth=1, heads=2, mlp_dim=32)


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest.one_thread


def make(seed: int = 0, **overrides):
    torch.manual_seed(seed)
    model = create_model("ViT-Micro/4", **{**TINY, **overrides})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step))
    return model, optimizer, scheduler


def step(model, optimizer, scheduler, seed: int):
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(8, 1, 16, 16, generator=g), torch.randint(0, 5, (8,), generator=g)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def saved(tmp_path):
    """A checkpoint after 3 optimiser steps, with the objects that wrote it."""
    model, optimizer, scheduler = make()
    for s in range(3):
        step(model, optimizer, scheduler, s)
    path = save_checkpoint(
        tmp_path / "run" / "checkpoint.safetensors",
        model,
        optimizer,
        scheduler,
        progress={"epoch": 1, "step_in_epoch": 2},
        meta={"model_config": model.config.to_dict(), "note": [1, 2]},
    )
    return path, model, optimizer, scheduler


def test_round_trip_restores_model_optimizer_scheduler(saved):
    path, model, optimizer, scheduler = saved
    model2, optimizer2, scheduler2 = make(seed=1)  # other initial weights, fresh optimiser
    assert not torch.equal(model2.patch_embed.proj.weight, model.patch_embed.proj.weight)
    meta = load_checkpoint(path, model2, optimizer2, scheduler2, model_config=model.config.to_dict())
    assert meta["progress"] == {"epoch": 1, "step_in_epoch": 2} and meta["note"] == [1, 2]
    for (name, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        assert torch.equal(a, b), name
    state, state2 = optimizer.state_dict(), optimizer2.state_dict()
    assert len(state2["state"]) == len(state["state"]) == len(list(model.parameters()))
    for i, s in state["state"].items():
        assert set(s) == set(state2["state"][i]) == {"step", "exp_avg", "exp_avg_sq"}
        for k in s:
            assert torch.equal(s[k], state2["state"][i][k]), (i, k)
    assert optimizer2.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 / 4)
    assert scheduler2.last_epoch == scheduler.last_epoch == 3
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    # and training goes on identically from both
    step(model, optimizer, scheduler, 10)
    step(model2, optimizer2, scheduler2, 10)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()


def test_round_trip_restores_the_random_number_generators(tmp_path):
    model, optimizer, scheduler = make()
    torch.manual_seed(123)
    random.seed(456)
    path = save_checkpoint(tmp_path / "c.safetensors", model, optimizer, scheduler)
    expected = torch.rand(5), random.random()
    torch.manual_seed(0)
    random.seed(0)
    assert torch.rand(5)[0] != expected[0][0]
    load_checkpoint(path, model, optimizer, scheduler)
    assert torch.equal(torch.rand(5), expected[0]) and random.random() == expected[1]


def test_ema_weights_round_trip(tmp_path):
    model, optimizer, scheduler = make()
    ema = torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    for s in range(2):
        step(model, optimizer, scheduler, s)
        ema.update_parameters(model)
    path = save_checkpoint(tmp_path / "c.safetensors", model, optimizer, scheduler, ema=ema)
    model2, optimizer2, scheduler2 = make(seed=1)
    ema2 = torch.optim.swa_utils.AveragedModel(model2, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    load_checkpoint(path, model2, optimizer2, scheduler2, ema=ema2)
    assert int(ema2.n_averaged) == 2
    for a, b in zip(ema.module.parameters(), ema2.module.parameters()):
        assert torch.equal(a, b)
    assert not torch.equal(ema2.module.patch_embed.proj.weight, model2.patch_embed.proj.weight)


# ---------------------------------------------------------------------------------------------------- atomic writes
def test_written_atomically_without_leftovers(saved):
    path, model, optimizer, scheduler = saved
    first = sha(path)
    step(model, optimizer, scheduler, 5)
    save_checkpoint(path, model, optimizer, scheduler)
    assert sha(path) != first
    assert [p.name for p in path.parent.iterdir()] == ["checkpoint.safetensors"]


def test_a_failed_write_keeps_the_previous_checkpoint(saved, monkeypatch):
    path, model, optimizer, scheduler = saved
    before = sha(path)

    def crash(tensors, filename, metadata=None):
        with open(filename, "wb") as f:  # half a file, then the process "dies"
            f.write(b"\x00" * 100)
        raise OSError("No space left on device")

    monkeypatch.setattr(ckpt, "save_file", crash)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(path, model, optimizer, scheduler)
    assert sha(path) == before
    read_checkpoint(path)  # still a good checkpoint
    assert [p.name for p in path.parent.iterdir()] == ["checkpoint.safetensors"]


# ------------------------------------------------------------------------------------------- files that are refused
@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_a_corrupt_file_is_a_checkpoint_error(saved, damage):
    path, model, optimizer, scheduler = saved
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) // 2], "garbage": b"not a checkpoint " * 64, "empty": b""}[damage])
    with pytest.raises(CheckpointError, match="corrupt") as err:
        load_checkpoint(path, model, optimizer, scheduler)
    assert str(path) in str(err.value)


def test_missing_file_is_a_checkpoint_error(tmp_path):
    model, _, _ = make()
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "nothing.safetensors", model)


@pytest.mark.parametrize("metadata", [None, {"format": '"something-else"'}, {"vitlib": "0.1.0"}])
def test_other_safetensors_files_are_refused(tmp_path, metadata):
    """A weights file (model.safetensors has metadata {'vitlib': '0.1.0'}) is not a training checkpoint."""
    model, _, _ = make()
    path = tmp_path / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path), metadata=metadata)
    with pytest.raises(CheckpointError, match="not a vitlib"):
        load_checkpoint(path, model)


def test_another_architecture_is_refused_and_the_file_left_alone(saved):
    path, model, _, _ = saved
    before = sha(path)
    wider, optimizer, scheduler = make(dim=32)
    wider_weights = {k: v.clone() for k, v in wider.state_dict().items()}
    with pytest.raises(CheckpointError, match="another model") as err:
        load_checkpoint(path, wider, optimizer, scheduler, model_config=wider.config.to_dict())
    assert "dim" in str(err.value) and "(16, 32)" in str(err.value)
    assert sha(path) == before
    assert all(torch.equal(v, wider.state_dict()[k]) for k, v in wider_weights.items())  # the model is untouched too
    # without the config check, the weights themselves do not fit: still a CheckpointError, not a bare RuntimeError
    with pytest.raises(CheckpointError, match="does not fit"):
        load_checkpoint(path, wider, optimizer, scheduler)
    deeper, optimizer, scheduler = make(depth=2)
    with pytest.raises(CheckpointError, match="does not fit"):
        load_checkpoint(path, deeper, optimizer, scheduler)
    assert sha(path) == before
