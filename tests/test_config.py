"""ViTConfig as the one description of a model, the ViT's one token-level forward, the objectives' interface, and the
small shared helpers."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from vitlib import VisionTransformer, ViTConfig, build_vit, create_model
from vitlib.analysis.cost import model_flops
from vitlib.data import get_dataset
from vitlib.objectives import MAE, Classification, MaskedPatchPrediction, get_objective, objective_name
from vitlib.train import TrainConfig, check_config, load_pretrained, train
from vitlib.utils import pair, square_grid, write_csv, write_json

SMALL = dict(image_size=28, patch_size=7, in_channels=1, num_classes=5, dim=32, depth=2, heads=4, mlp_dim=64)


# ------------------------------------------------------------------------------------------------ ViTConfig
def test_the_config_is_frozen_and_a_change_is_a_new_checked_config():
    c = ViTConfig(**SMALL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.dim = 64
    wider = c.replace(dim=48, heads=4)
    assert (c.dim, wider.dim) == (32, 48) and wider.patch_size == 7
    with pytest.raises(ValueError, match="not divisible by heads=5"):
        c.replace(heads=5)
    with pytest.raises(ValueError, match="does not divide the image size 28x28"):
        c.replace(patch_size=5)
    with pytest.raises(ValueError, match="unknown pool"):
        c.replace(pool="max")


@pytest.mark.parametrize("options", [{}, dict(image_size=(14, 28)), dict(pool="gap"), dict(head_hidden=16)])
def test_to_dict_is_json_and_from_dict_gives_the_config_back(options):
    c = ViTConfig(**{**SMALL, **options})
    assert ViTConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    with pytest.raises(ValueError, match="not ViTConfig options: \\['kind'\\]"):
        ViTConfig.from_dict({**c.to_dict(), "kind": "VisionTransformer"})


def test_the_model_is_built_from_its_config_alone():
    torch.manual_seed(0)
    a = VisionTransformer(ViTConfig(**SMALL))
    torch.manual_seed(0)
    b = VisionTransformer(**SMALL)  # options, or a config: the same model, the same draws
    assert a.config == b.config and all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())
    )
    assert VisionTransformer(a.config, dim=64).config.dim == 64  # options beside a config replace its values
    assert create_model("ViT-Micro/7", num_classes=5, image_size=28, in_channels=1).config.dim == 64


def test_a_new_resolution_is_a_new_config():
    model = VisionTransformer(**SMALL)
    before = model.config
    model.set_image_size(42)
    assert before.image_size == 28 and model.config.image_size == 42 and model.config.replace(image_size=28) == before
    assert model.image_size == (42, 42) and model.num_patches == 36
    assert model_flops(model)["patch_embed"] == 36 / 16 * model_flops(before)["patch_embed"]


def test_a_run_saves_the_config_and_load_pretrained_rebuilds_from_it(tmp_path):
    data = get_dataset("fashion-mnist-mini", subset=200)
    cfg = TrainConfig(
        model="ViT-Micro/7",
        epochs=1,
        batch_size=50,
        device="cpu",
        progress=False,
        out=str(tmp_path / "run"),
        eval_test=False,
    )
    result = train(cfg, data=data)
    loaded = load_pretrained(tmp_path / "run")
    assert loaded.config == result.model.config
    saved = json.loads((tmp_path / "run" / "config.json").read_text())["model"]
    assert saved == {**result.model.config.to_dict(), "kind": "VisionTransformer"}


# ------------------------------------------------------------------------------------------------ one forward
def test_the_forward_is_the_head_on_the_features():
    model = VisionTransformer(**SMALL).eval()
    with torch.no_grad():
        model.head.weight.normal_()  # the zero-initialised head would give zeros either way
    images = torch.randn(2, 1, 28, 28)
    z = model.forward_features(images)
    assert z.shape == (2, 17, 32)
    assert torch.equal(model(images), model.forward_head(z))
    assert torch.equal(model.forward_head(z, pre_logits=True), z[:, 0])  # y = LN(z_L^0), eq. (4)
    weights = model.attention_maps(images)  # the same forward, attention written out
    assert len(weights) == 2 and weights[0].shape == (2, 4, 17, 17)
    assert all(block.attn.recorded is None for block in model.blocks)


def test_mae_keeps_some_patches_each_with_its_own_position_embedding():
    vit = VisionTransformer(**{**SMALL, "depth": 0, "num_classes": 0}).eval()  # no blocks: eq. (1) and the final LN
    images = torch.randn(2, 1, 28, 28)
    keep = torch.tensor([[0, 5, 9], [1, 2, 15]])
    z0 = MAE(vit).encode(images, keep)
    full = vit.forward_features(images)  # [class] then all 16 patches, each with its E_pos
    assert torch.equal(z0[:, 0], full[:, 0])
    assert torch.equal(z0[:, 1:], torch.gather(full[:, 1:], 1, keep[..., None].expand(-1, -1, 32)))
    with pytest.raises(ValueError, match="its own absolute"):
        MAE(build_vit(ViTConfig(**SMALL, pos_embed="relative")))


def test_forward_features_is_its_public_pieces_in_turn():
    """What MAE and masked patch prediction build their forward from: x_p E, eq. (1), the encoder."""
    model = VisionTransformer(**SMALL).eval()
    images = torch.randn(2, 1, 28, 28)
    x = model.patch_embed(images)  # x_p E
    z0 = torch.cat([model.cls_token.expand(2, -1, -1), x], dim=1) + model.position_embedding()
    torch.testing.assert_close(model.embed(x), z0)
    torch.testing.assert_close(model.forward_features(images), model.transformer(z0))


def test_mae_applies_the_embedding_dropout_like_the_vit():
    """MAE's encoder is the ViT's own forward: with dropout on, its output changes from draw to draw."""
    mae = MAE(VisionTransformer(**{**SMALL, "num_classes": 0}, dropout=0.5)).train()
    images, keep = torch.randn(2, 1, 28, 28), torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    torch.manual_seed(0)
    a = mae.encode(images, keep)
    torch.manual_seed(1)
    assert not torch.equal(a, mae.encode(images, keep))
    assert torch.equal(mae.eval().encode(images, keep), mae.encode(images, keep))


# ----------------------------------------------------------------------------------------------- objectives
def test_each_model_says_its_objective_through_the_wrappers():
    vit = VisionTransformer(**{**SMALL, "num_classes": 0})
    assert objective_name(vit) == "classify"
    assert objective_name(MAE(vit)) == "mae" and objective_name(MaskedPatchPrediction(vit)) == "mpp"
    wrapped = torch.nn.Module()
    wrapped.module = MAE(vit)  # as DDP and the EMA hold the model
    assert objective_name(wrapped) == "mae" and objective_name(torch.compile(MaskedPatchPrediction(vit))) == "mpp"


def test_the_objectives_share_one_interface():
    images, labels = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    vit = VisionTransformer(**SMALL)
    loss, correct, logits = get_objective("classify", 0.1).loss(vit, images, labels)
    assert loss.ndim == 0 and 0 <= int(correct) <= 4 and logits.shape == (4, 5)
    summed, _, _ = Classification().loss(vit, images, labels, reduction="sum")
    assert torch.allclose(summed, torch.nn.functional.cross_entropy(vit(images), labels, reduction="sum"))
    torch.manual_seed(0)
    mae_loss, mae_correct, mae_logits = get_objective("mae").loss(MAE(VisionTransformer(**SMALL)), images, labels)
    assert mae_loss.ndim == 0 and mae_correct is None and mae_logits is None
    with pytest.raises(ValueError, match="never looks at a label"):  # the run's options are checked in one place
        check_config(TrainConfig(objective="mpp", label_smoothing=0.1))
    with pytest.raises(ValueError, match="unknown objective 'dino'"):
        get_objective("dino")


# ---------------------------------------------------------------------------------------------- the helpers
def test_pair_and_square_grid():
    assert pair(5) == (5, 5) and pair((3, 4)) == (3, 4) and pair([3, 4]) == (3, 4)
    with pytest.raises(ValueError, match="image_size must be an int or a \\(height, width\\) pair, got 'x'"):
        pair("x", "image_size")
    assert square_grid(49) == (7, 7)
    with pytest.raises(ValueError, match="50 patch embeddings are not a square grid"):
        square_grid(50)


def test_csv_and_json_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    path = write_csv(tmp_path / "rows.csv", [{"a": 1}, {"a": 2, "b": 3}])
    assert path.read_text().splitlines() == ["a,b", "1,", "2,3"]
    write_json(tmp_path / "x.json", {"when": tmp_path})
    assert json.loads((tmp_path / "x.json").read_text()) == {"when": str(tmp_path)}

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(json, "dumps", broken)
    with pytest.raises(OSError, match="disk full"):
        write_json(tmp_path / "x.json", {"new": 1})
    assert json.loads((tmp_path / "x.json").read_text()) == {"when": str(tmp_path)}  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "x.json"]  # no temporary file left
