"""vitlib.analysis.cost: the analytic FLOP count equals torch's FlopCounterMode on small models, and the reference
numbers."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import vitlib
from vitlib.analysis.cost import PARTS, attention_share, model_flops, vit_flops

SMALL = dict(image_size=28, patch_size=4, in_channels=1, num_classes=5, dim=32, depth=2, heads=4, mlp_dim=64)


def counted(model: torch.nn.Module, images: torch.Tensor) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model.eval()(images)
    return counter.get_total_flops()


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"pool": "gap"},
        {"head_hidden": 48},
        {"image_size": 32, "patch_size": 8, "in_channels": 3},
        {"resize_to": (28, 32)},
        {"conv_patch_embed": False},
        {"num_classes": 0},
        {"pos_embed": "sincos2d", "mlp_dim": 96},
    ],
)
def test_equals_flop_counter_per_image(overrides):
    # fused=False: the written-out attention (FlopCounterMode does not count inside the CPU's fused SDPA kernel)
    resize_to = overrides.pop("resize_to", None)
    conv = overrides.pop("conv_patch_embed", True)
    model = vitlib.build_vit(vitlib.ViTConfig(**{**SMALL, **overrides}), fused=False, conv_patch_embed=conv)
    if resize_to:  # a non-square grid after set_image_size (section 3.2)
        model.set_image_size(resize_to)
    h, w = model.image_size
    images = torch.randn(3, model.in_channels, h, w)
    assert counted(model, images) == 3 * vit_flops(model.config)["total"]


def test_parts_and_names():
    f = model_flops("ViT-Micro/4", image_size=28, in_channels=1, num_classes=10)
    assert list(f) == ["stem", *PARTS, "total"] and f["stem"] == 0 and f["total"] == sum(f[k] for k in PARTS)
    # Micro/4 on 28x28 grey: N = 49, 50 tokens, D = 64, M = 128, 4 layers
    assert f["patch_embed"] == 2 * 49 * 16 * 64
    assert f["attn_logits"] == f["attn_values"] == 4 * 2 * 50 * 50 * 64
    assert f["mlp"] == 4 * 2 * 50 * 64 * 128 * 2
    model = vitlib.create_model("ViT-Micro/4", num_classes=10, image_size=28, in_channels=1)
    assert model_flops(model) == f == model_flops(model.config)
    assert model_flops(model.config, image_size=56)["patch_embed"] == 4 * f["patch_embed"]  # a new config, N x 4


def test_multiply_adds_match_torchvision_meta():
    """torchvision's weights.meta['_ops'] are GMACs (half our FLOPs), rounded to 3 decimals."""
    from torchvision.models import ViT_B_16_Weights, ViT_H_14_Weights, ViT_L_16_Weights

    for name, weights, size in [
        ("ViT-B/16", ViT_B_16_Weights.IMAGENET1K_V1, 224),
        ("ViT-L/16", ViT_L_16_Weights.IMAGENET1K_V1, 224),
        ("ViT-H/14", ViT_H_14_Weights.IMAGENET1K_SWAG_LINEAR_V1, 224),
    ]:
        gmacs = model_flops(name, image_size=size)["total"] / 2e9
        assert abs(gmacs - weights.meta["_ops"]) < 0.02, (name, gmacs, weights.meta["_ops"])


def test_attention_share_grows_as_patches_shrink():
    shares = [attention_share(model_flops(f"ViT-B/{p}")) for p in (32, 16, 8, 4)]
    assert shares == sorted(shares) and shares[0] < 0.02 and shares[-1] > 0.4


def test_errors():
    with pytest.raises(ValueError, match="does not divide"):
        model_flops("ViT-B/16", image_size=30)
    with pytest.raises(ValueError, match="hybrid"):
        model_flops("R50+ViT-B/16")
    with pytest.raises(ValueError, match="relative"):
        vit_flops(vitlib.ViTConfig(pos_embed="relative"))
    with pytest.raises(TypeError, match="VisionTransformer"):
        model_flops(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("visible", [12, 4, 49])  # 12 of 49 patches form no square grid (ViT-Mini/4, MAE's 25%)
def test_visible_tokens_match_mae_encoder(visible):
    """vit_flops(config, visible=K) counts the encoder on any K kept patches (a sequence, not an image): it equals
    FlopCounterMode on MAE's encoder, head left out."""
    from vitlib.objectives.mae import MAE

    model = vitlib.VisionTransformer(**SMALL, fused=False)
    mae = MAE(model).eval()
    keep = torch.stack([torch.randperm(49)[:visible] for _ in range(3)])
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        mae.encode(torch.randn(3, 1, 28, 28), keep)
    expected = vit_flops(model.config, visible=visible)
    assert counter.get_total_flops() == 3 * (expected["total"] - expected["head"])
    full = vit_flops(model.config)
    assert expected["patch_embed"] == full["patch_embed"]  # every patch is embedded before some are kept
    assert (expected == full) == (visible == 49)


@pytest.mark.parametrize("visible", [-1, 50, 2.5, True])
def test_visible_out_of_range_is_a_clear_error(visible):
    with pytest.raises(ValueError, match="visible must be a number of patches from 0 to N = 49"):
        vit_flops(vitlib.ViTConfig(**SMALL), visible=visible)
