"""Converters from the reference implementations: the same weights must give the same logits (within 1e-4).

Every reference model has its zero-initialised parts (heads, torchvision's [class] token, LayerNorm biases) randomised
first: otherwise a wrongly mapped head or token would still give matching (all-zero or token-independent) logits.
"""

import numpy as np
import pytest
import timm
import torch
import torchvision
from timm.models.vision_transformer import _load_weights

import vitlib
from vitlib import VisionTransformer, from_jax_npz, from_timm, from_torchvision


@torch.no_grad()
def perturb_(model: torch.nn.Module, std: float = 0.1) -> torch.nn.Module:
    """Add N(0, std^2) noise to every parameter, so nothing is left at 0 (or LayerNorm's 1)."""
    for p in model.parameters():
        p.add_(torch.randn_like(p) * std)
    return model


def assert_same_logits(ours: VisionTransformer, expected: torch.Tensor, images: torch.Tensor) -> None:
    """Compare with the reference logits through both of vitlib's attention paths (fused SDPA and written out)."""
    assert expected.std() > 0.1, "vacuous comparison: the reference logits barely vary"
    ours.eval()
    unfused = VisionTransformer(ours.config, fused=False).eval()
    unfused.load_state_dict(ours.state_dict())
    with torch.no_grad():
        for model in (ours, unfused):
            assert (model(images) - expected).abs().max() < 1e-4


@pytest.fixture
def torchvision_vit(randomise):
    def make(**kwargs) -> torchvision.models.VisionTransformer:
        model = torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128, num_classes=10, **kwargs
        )
        randomise(perturb_(model).heads)
        return model.eval()

    return make


@pytest.fixture
def images():
    return torch.randn(3, 3, 32, 32)


class TestTorchvision:
    @pytest.mark.parametrize("representation_size", [None, 32])
    def test_same_logits(self, representation_size, images, torchvision_vit):
        tv = torchvision_vit(representation_size=representation_size)
        ours = from_torchvision(tv)
        assert ours.config.head_hidden == representation_size
        assert (ours.config.dim, ours.config.depth, ours.config.heads, ours.config.mlp_dim) == (64, 2, 4, 128)
        with torch.no_grad():
            assert_same_logits(ours, tv(images), images)

    def test_other_sizes(self, randomise):
        tv = torchvision.models.VisionTransformer(
            image_size=48, patch_size=12, num_layers=3, num_heads=3, hidden_dim=48, mlp_dim=96, num_classes=4
        )
        randomise(perturb_(tv).heads)
        images = torch.randn(2, 3, 48, 48)
        with torch.no_grad():
            assert_same_logits(from_torchvision(tv.eval()), tv(images), images)

    def test_from_state_dict(self, images, torchvision_vit):
        tv = torchvision_vit()
        with torch.no_grad():
            assert_same_logits(from_torchvision(tv.state_dict(), num_heads=4), tv(images), images)
        with pytest.raises(ValueError, match="num_heads"):  # width 64 is no Table 1 width: heads cannot be guessed
            from_torchvision(tv.state_dict())

    def test_not_a_torchvision_vit(self):
        with pytest.raises(ValueError, match="conv_proj.weight"):
            from_torchvision(vitlib.create_model("ViT-Micro/4", image_size=28).state_dict())
        with pytest.raises(ValueError, match="SwinTransformer is not a torchvision VisionTransformer"):
            from_torchvision(torchvision.models.swin_t())
        with pytest.raises(ValueError, match="vitlib.model.vit.VisionTransformer is not a torchvision"):
            from_torchvision(vitlib.create_model("ViT-Micro/4", image_size=28))


class TestTimm:
    @pytest.mark.parametrize(
        "kwargs",
        [
            dict(img_size=(24, 40), patch_size=8, in_chans=1, embed_dim=48, num_heads=3, mlp_ratio=2.5),  # rectangular
            dict(
                img_size=28,
                patch_size=7,
                in_chans=1,
                embed_dim=32,
                num_heads=4,
                global_pool="avg",
                class_token=False,
                fc_norm=False,
            ),  # GAP without a [class] token (appendix D.3)
            dict(img_size=32, patch_size=4, embed_dim=64, num_heads=2, qkv_bias=False, num_classes=0),  # features only
            dict(img_size=48, patch_size=16, embed_dim=96, num_heads=6, depth=3, global_pool="avg", fc_norm=False),
        ],
        ids=["rectangular", "gap-no-cls", "no-qkv-bias-no-head", "gap-with-cls"],
    )
    def test_any_size_and_pooling(self, kwargs, randomise):
        """Every timm ViT that vitlib can build: other widths, heads, MLP ratios, image sizes, pooling, no head."""
        kwargs = {"depth": 2, "num_classes": 7, **kwargs}
        tm = timm.models.vision_transformer.VisionTransformer(**kwargs)
        perturb_(tm)
        tm.eval()
        ours = from_timm(tm)
        h, w = kwargs["img_size"] if isinstance(kwargs["img_size"], tuple) else (kwargs["img_size"],) * 2
        assert ours.image_size == (h, w) and ours.config.heads == kwargs["num_heads"]
        images = torch.randn(2, kwargs.get("in_chans", 3), h, w)
        with torch.no_grad():
            assert_same_logits(ours, tm(images), images)

    def test_same_logits(self, images, randomise):
        tm = timm.create_model(
            "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2, num_classes=10
        )
        randomise(perturb_(tm).head)
        tm.eval()
        ours = from_timm(tm)
        assert (ours.config.dim, ours.config.depth, ours.config.heads) == (192, 2, 3)
        with torch.no_grad():
            assert_same_logits(ours, tm(images), images)

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            (dict(global_pool="avg"), "fc_norm"),
            (dict(reg_tokens=4), "register"),
            (dict(init_values=1e-5), "LayerScale"),
            (dict(no_embed_class=True), "no_embed_class"),
        ],
    )
    def test_unsupported_variants(self, kwargs, match):
        tm = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=1, **kwargs)
        with pytest.raises(ValueError, match=match):
            from_timm(tm)

    @pytest.mark.parametrize(
        "name, kwargs, match",
        [
            (
                "swin_tiny_patch4_window7_224",
                dict(depths=(1, 1, 1, 1)),
                "SwinTransformer is not a timm VisionTransformer",
            ),
            ("deit_tiny_distilled_patch16_224", dict(img_size=32, depth=1), "distillation tokens"),
            ("vit_tiny_patch16_224", dict(img_size=32, depth=1, act_layer="relu"), "activation ReLU"),
            ("vit_tiny_patch16_224", dict(img_size=32, depth=1, pos_embed="none"), "lack of a position embedding"),
        ],
    )
    def test_refused_before_loading(self, name, kwargs, match):
        with pytest.raises(ValueError, match=match):
            from_timm(timm.create_model(name, pretrained=False, **kwargs))

    def test_refused_when_the_logits_differ(self, randomise):
        """A part no check names (here a scaling on a residual branch) is caught by comparing logits."""
        tm = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, depth=2)
        tm.blocks[1].drop_path1 = torch.nn.Hardtanh(-0.1, 0.1)
        randomise(perturb_(tm).head)
        with pytest.raises(ValueError, match="logits differ"):
            from_timm(tm.train())
        assert tm.training, "the source model's mode is restored"


# The original google-research/vision_transformer layout, written by hand with random numbers.
P, C, GRID, D, HEADS, MLP_DIM, K, DEPTH, HIDDEN = 4, 3, 4, 32, 4, 64, 5, 2, 24


def jax_checkpoint(pre_logits: bool = False, grid: tuple[int, int] = (GRID, GRID), gap: bool = False) -> dict:
    rng = np.random.default_rng(0)

    def r(*shape, mean=0.0, scale=0.2):
        return (mean + scale * rng.standard_normal(shape)).astype(np.float32)

    dh = D // HEADS
    w = {
        "embedding/kernel": r(P, P, C, D),
        "embedding/bias": r(D),
        "Transformer/posembed_input/pos_embedding": r(1, (0 if gap else 1) + grid[0] * grid[1], D),
        "Transformer/encoder_norm/scale": r(D, mean=1.0),
        "Transformer/encoder_norm/bias": r(D),
        "head/kernel": r(HIDDEN if pre_logits else D, K),
        "head/bias": r(K),
    }
    if not gap:
        w["cls"] = r(1, 1, D)
    if pre_logits:
        w["pre_logits/kernel"], w["pre_logits/bias"] = r(D, HIDDEN), r(HIDDEN)
    for i in range(DEPTH):
        block = f"Transformer/encoderblock_{i}/"
        mha = block + "MultiHeadDotProductAttention_1/"
        for ln in ("LayerNorm_0", "LayerNorm_2"):
            w[f"{block}{ln}/scale"], w[f"{block}{ln}/bias"] = r(D, mean=1.0), r(D)
        for n in ("query", "key", "value"):
            w[f"{mha}{n}/kernel"], w[f"{mha}{n}/bias"] = r(D, HEADS, dh), r(HEADS, dh)
        w[mha + "out/kernel"], w[mha + "out/bias"] = r(HEADS, dh, D), r(D)
        w[block + "MlpBlock_3/Dense_0/kernel"], w[block + "MlpBlock_3/Dense_0/bias"] = r(D, MLP_DIM), r(MLP_DIM)
        w[block + "MlpBlock_3/Dense_1/kernel"], w[block + "MlpBlock_3/Dense_1/bias"] = r(MLP_DIM, D), r(D)
    return w


def timm_from_npz(path, num_classes: int = K) -> torch.nn.Module:
    tm = timm.models.vision_transformer.VisionTransformer(
        img_size=GRID * P,
        patch_size=P,
        in_chans=C,
        num_classes=num_classes,
        embed_dim=D,
        depth=DEPTH,
        num_heads=HEADS,
        mlp_ratio=MLP_DIM / D,
    )
    _load_weights(tm, str(path))
    return tm.eval()


class TestJaxNpz:
    @pytest.fixture
    def images(self):
        return torch.randn(3, C, GRID * P, GRID * P)

    def test_same_logits_as_timm_load_weights(self, tmp_path, images):
        path = tmp_path / "ViT-test.npz"
        np.savez(path, **jax_checkpoint())
        tm = timm_from_npz(path)
        ours = from_jax_npz(path)
        assert (ours.config.patch_size, ours.config.depth, ours.config.heads) == (P, DEPTH, HEADS)
        with torch.no_grad():
            assert_same_logits(ours, tm(images), images)

    def test_pre_logits_layer(self, tmp_path, images):
        """timm drops the representation layer: apply it by hand to the features of a headless timm model."""
        w = jax_checkpoint(pre_logits=True)
        path = tmp_path / "ViT-test.npz"
        np.savez(path, **w)
        ours = from_jax_npz(path)
        assert ours.config.head_hidden == HIDDEN
        t = {k: torch.from_numpy(v) for k, v in w.items()}
        tm = timm_from_npz(path, num_classes=0)
        with torch.no_grad():
            pooled = tm(images)  # LN(z_L^0)
            expected = (
                torch.tanh(pooled @ t["pre_logits/kernel"] + t["pre_logits/bias"]) @ t["head/kernel"] + t["head/bias"]
            )
            assert_same_logits(ours, expected, images)

    def test_gap_and_rectangular_images(self, tmp_path):
        """A 'gap' checkpoint (no [class] token) of 3x5 patches: the same as converting the [class]-token checkpoint's
        encoder by hand, and the same logits as timm's loader for the [class]-token version at that grid."""
        path = tmp_path / "ViT-gap.npz"
        np.savez(path, **jax_checkpoint(grid=(3, 5), gap=True))
        ours = from_jax_npz(path, image_size=(3 * P, 5 * P))
        assert ours.config.pool == "gap" and not ours.config.class_token and ours.image_size == (3 * P, 5 * P)
        tm = timm.models.vision_transformer.VisionTransformer(
            img_size=(3 * P, 5 * P),
            patch_size=P,
            in_chans=C,
            num_classes=K,
            embed_dim=D,
            depth=DEPTH,
            num_heads=HEADS,
            mlp_ratio=MLP_DIM / D,
            global_pool="avg",
            class_token=False,
            fc_norm=False,
        )
        _load_weights(tm, str(path))
        images = torch.randn(2, C, 3 * P, 5 * P)
        with torch.no_grad():
            assert_same_logits(ours, tm.eval()(images), images)

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="ViT-B_16.npz"):
            from_jax_npz(tmp_path / "ViT-B_16.npz")

    def test_not_a_vit_checkpoint(self, tmp_path):
        path = tmp_path / "other.npz"
        np.savez(path, weights=np.zeros(3, np.float32), bias=np.ones(2, np.float32))
        with pytest.raises(ValueError, match="not an original ViT checkpoint"):
            from_jax_npz(path)
