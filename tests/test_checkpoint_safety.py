"""A checkpoint stores a sha256 of its tensors: one whose tensor data was overwritten in place is refused on load with a
CheckpointError that names the file (and a resume from it changes nothing); an older checkpoint without a checksum
still loads, with a warning."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

import pytest
import torch
from helpers import TINY_RUN
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from vitlib import create_model
from vitlib.train import main, train
from vitlib.train.checkpoint import CHECKSUM, CheckpointError, load_checkpoint, read_checkpoint, save_checkpoint

pytestmark = pytest.mark.usefixtures("one_thread")


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def overwrite_tensor(path, name: str, value: float) -> float:
    """Write `value` over every element of tensor `name` inside the file, in place (the header is left as it is);
    returns the largest change of a weight."""
    with safe_open(str(path), "pt") as f:
        before = f.get_tensor(name).clone()
    raw = path.read_bytes()
    header_len = struct.unpack("<Q", raw[:8])[0]
    start, end = json.loads(raw[8 : 8 + header_len])[name]["data_offsets"]
    assert before.dtype == torch.float32 and end - start == 4 * before.numel()
    with open(path, "r+b") as f:
        f.seek(8 + header_len + start)
        f.write(struct.pack(f"<{before.numel()}f", *[value] * before.numel()))
    return float((before - value).abs().max())


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = create_model("ViT-Micro/4", num_classes=5, image_size=16, in_channels=1, dim=16, depth=1, heads=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(2, 1, 16, 16)).sum().backward()
    optimizer.step()
    path = save_checkpoint(tmp_path / "checkpoint.safetensors", model, optimizer, progress={"epoch": 1})
    return path, model, optimizer


def test_a_checkpoint_stores_the_checksum_of_its_tensors(saved):
    path, _, _ = saved
    with safe_open(str(path), "pt") as f:
        stored = json.loads(f.metadata()[CHECKSUM])
    tensors = load_file(str(path))
    digest = hashlib.sha256()
    for name in sorted(tensors):  # the documented recipe: name, dtype, shape and raw bytes in sorted name order
        t = tensors[name]
        digest.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())
    assert stored == digest.hexdigest()
    read_checkpoint(path)  # verifies


def test_tensor_data_overwritten_in_place_is_refused_naming_the_file(saved):
    path, model, optimizer = saved
    off = overwrite_tensor(path, "model.patch_embed.proj.weight", 48.0)
    assert off > 40  # the weights would be off by that much
    before, weights = sha(path), {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.patch_embed.proj.weight.zero_()
    weights["patch_embed.proj.weight"].zero_()
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, model, optimizer)
    message = str(err.value)
    assert (
        message.startswith(f"{path} fails its checksum (sha256 of its tensors ")
        and "changed after it was saved" in message
    )
    assert "Resume from an intact copy, or delete it to start afresh. The file was left as it is." in message
    assert sha(path) == before
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())  # nothing was loaded
    with pytest.raises(CheckpointError, match="fails its checksum"):
        read_checkpoint(path)
    read_checkpoint(path, tensors=False)  # the header alone is still readable (shapes, progress)


def test_an_old_checkpoint_without_a_checksum_loads_with_a_warning(saved, tmp_path):
    path, model, optimizer = saved
    with safe_open(str(path), "pt") as f:
        metadata = {k: v for k, v in f.metadata().items() if k != CHECKSUM}
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(path)), str(old), metadata=metadata)  # as vitlib wrote checkpoints before
    with pytest.warns(UserWarning, match=f"{old} has no checksum .* loaded as they are"):
        meta = load_checkpoint(old, model, optimizer)
    assert meta["progress"] == {"epoch": 1}


def test_a_resume_from_a_damaged_checkpoint_is_refused_and_changes_nothing(tmp_path, capsys):
    """Was: the damaged checkpoint loaded and the run resumed with weights off by up to 48.7."""
    out = tmp_path / "run"
    cfg = dataclasses.replace(TINY_RUN, subset=128, batch_size=32, epochs=1, out=str(out))
    train(cfg)
    ckpt = out / "checkpoint.safetensors"
    overwrite_tensor(ckpt, "model.head.weight", 48.7)
    before = {p.name: sha(p) for p in out.iterdir()}
    argv = ["--model", "ViT-Micro/7", "--subset", "128", "--batch-size", "32", "--epochs", "1", "--lr", "3e-3"]
    argv += ["--warmup-epochs", "0.5", "--log-every", "4", "--no-progress", "--no-eval-test", "--out", str(out)]
    assert main([*argv, "--epochs", "1", "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {ckpt} fails its checksum") and "Traceback" not in err, err
    assert {p.name: sha(p) for p in out.iterdir()} == before
    with pytest.raises(CheckpointError, match="fails its checksum"):
        train(dataclasses.replace(cfg, resume=True))
