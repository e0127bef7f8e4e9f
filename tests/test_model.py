"""The model of section 3.1 and the variants of Table 1: sizes, names, input checks, pooling, heads, attention maps,
hybrid."""

import re

import pytest
import torch
import torchvision

import vitlib
from vitlib import VisionTransformer, count_parameters, create_model, parse_name
from vitlib.analysis.finetune import replace_head


def on_meta(build):
    """Build a model without allocating its weights (ViT-H is 2.5 GB in float32)."""
    with torch.device("meta"):
        return build()


@pytest.mark.parametrize(
    "name, params", [("ViT-B/16", 86_567_656), ("ViT-L/16", 304_326_632), ("ViT-H/14", 632_045_800)]
)
def test_table_1_parameter_counts(name, params):
    model = on_meta(lambda: create_model(name))  # 1000 classes at 224x224
    assert next(model.parameters()).is_meta
    assert count_parameters(model) == params


@pytest.mark.parametrize("name, tv", [("ViT-B/32", "vit_b_32"), ("ViT-L/32", "vit_l_32"), ("ViT-Base/16", "vit_b_16")])
def test_parameter_counts_match_torchvision(name, tv):
    ours = on_meta(lambda: create_model(name))
    assert count_parameters(ours) == count_parameters(on_meta(getattr(torchvision.models, tv)))


def test_trainable_only_counts():
    model = create_model("ViT-Micro/4", num_classes=10, image_size=28, in_channels=1)
    total = count_parameters(model)
    model.head.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == total - (64 * 10 + 10)


def test_parse_name():
    assert parse_name("ViT-B/16") == dict(dim=768, depth=12, heads=12, mlp_dim=3072, patch_size=16)
    assert parse_name("ViT-Large/32") == dict(vitlib.VARIANTS["L"], patch_size=32)
    assert parse_name("R50+ViT-B/16")["hybrid"] == "resnet50"


@pytest.mark.parametrize("name", ["ViT-X/16", "ResNet", "ViT-B", "ViT-B/16x", ""])
def test_unknown_model_names_are_an_error(name):
    with pytest.raises(ValueError, match=re.escape(f"unknown model variant {name!r}")):
        create_model(name)


@pytest.mark.parametrize(
    "shape, expected, given",
    [
        ((2, 1, 32, 32), "28x28", "32x32"),
        ((2, 3, 28, 28), "1-channel", "3 channels"),
        ((1, 28, 28), r"\(B, C, H, W\)", r"\(1, 28, 28\)"),
    ],
)
def test_wrong_input_is_an_error_stating_expected_and_given(shape, expected, given, small_vit):
    with pytest.raises(ValueError, match=f"{expected}.*{given}"):
        small_vit()(torch.randn(shape))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="unknown pool 'max'"):
        VisionTransformer(pool="max")
    with pytest.raises(ValueError, match=r"needs the \[class\] token"):
        VisionTransformer(pool="cls", class_token=False)


def test_global_average_pooling_has_no_class_token(small_vit):
    model = small_vit(pool="gap").eval()
    assert model.cls_token is None and model.num_prefix_tokens == 0
    assert not any("cls_token" in name for name, _ in model.named_parameters())
    assert model.pos_embed.shape == (1, 49, 32)
    x = torch.randn(2, 1, 28, 28)
    z = model.forward_features(x)
    assert z.shape == (2, 49, 32)
    torch.testing.assert_close(model(x), model.head(z.mean(dim=1)))


def test_global_average_pooling_with_a_class_token_averages_the_patches_only(small_vit):
    model = small_vit(pool="gap", class_token=True).eval()
    x = torch.randn(2, 1, 28, 28)
    z = model.forward_features(x)
    assert z.shape == (2, 50, 32)
    torch.testing.assert_close(model(x), model.head(z[:, 1:].mean(dim=1)))


def test_class_token_pooling_reads_token_0(small_vit):
    model = small_vit().eval()
    x = torch.randn(2, 1, 28, 28)
    z = model.forward_features(x)
    assert z.shape == (2, 50, 32)
    torch.testing.assert_close(model(x), model.head(z[:, 0]))


class TestHeads:
    def test_fine_tuning_head_is_zero_initialised(self, small_vit):
        model = small_vit(random_head=False)
        assert isinstance(model.pre_logits, torch.nn.Identity) and isinstance(model.head, torch.nn.Linear)
        assert torch.equal(model(torch.randn(3, 1, 28, 28)), torch.zeros(3, 5))

    def test_pretraining_head_has_a_tanh_hidden_layer(self, small_vit):
        model = small_vit(random_head=False, head_hidden=16).eval()
        hidden, act = model.pre_logits
        assert isinstance(act, torch.nn.Tanh) and hidden.weight.shape == (16, 32) and model.head.in_features == 16
        x = torch.randn(4, 1, 28, 28)
        y = model.forward_head(model.forward_features(x), pre_logits=True)
        torch.testing.assert_close(model(x), model.head(torch.tanh(hidden(y))))
        assert model(x).abs().sum() > 0  # not zero-initialised

    def test_replacing_the_head_for_fine_tuning(self, small_vit):
        model = replace_head(small_vit(head_hidden=16), 7)
        assert isinstance(model.pre_logits, torch.nn.Identity) and model.config.head_hidden is None
        assert torch.equal(model(torch.randn(2, 1, 28, 28)), torch.zeros(2, 7))

    def test_no_classes_gives_the_representation(self, small_vit):
        model = small_vit(num_classes=0).eval()
        x = torch.randn(2, 1, 28, 28)
        torch.testing.assert_close(model(x), model.forward_features(x)[:, 0])


@pytest.mark.parametrize("pool, tokens", [("cls", 50), ("gap", 49)])
def test_attention_maps(pool, tokens, small_vit):
    model = small_vit(pool=pool)
    maps = model.attention_maps(torch.randn(3, 1, 28, 28))
    assert len(maps) == 2
    for w in maps:
        assert w.shape == (3, 4, tokens, tokens)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, tokens))
    assert not torch.allclose(maps[0], maps[1])


def test_hybrid_resnet18_stem_gives_7x7_tokens():
    model = create_model("R18+ViT-Micro/4", num_classes=10, image_size=28, in_channels=1).eval()
    assert isinstance(model.patch_embed, vitlib.model.HybridEmbedding) and isinstance(model, vitlib.VisionTransformer)
    assert model.patch_embed.grid == (7, 7) and model.num_patches == 49
    assert model.patch_embed.feature_channels == 64  # resnet18's layer1
    x = torch.randn(2, 1, 28, 28)
    assert model.forward_features(x).shape == (2, 50, 64)
    assert model(x).shape == (2, 10)
    with pytest.raises(NotImplementedError):
        model.set_image_size(56)


def test_hybrid_errors():
    with pytest.raises(ValueError, match="one of"):
        create_model("R18+ViT-Micro/5", image_size=40)
    with pytest.raises(ValueError, match="'ResNet-19': a small ResNet has 6n\\+2 layers"):
        create_model("R19+ViT-Micro/4", image_size=28)


@pytest.mark.parametrize(
    "variant", [dict(fused=False), dict(conv_patch_embed=False), dict(fused=False, pos_embed="relative")]
)
def test_fast_and_readable_paths_give_the_same_model(variant, small_vit, randomise):
    base = dict(pos_embed=variant.get("pos_embed", "learned"))
    fast = small_vit(**base).eval()
    if "pos_embed" in variant:
        for block in fast.blocks:
            randomise(block.attn.rel_pos)
    slow = small_vit(**variant).eval()
    slow.load_state_dict(fast.state_dict())
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(slow(x), fast(x), atol=1e-5, rtol=1e-5)


def test_training_mode_with_dropout_and_drop_path_is_stochastic_eval_is_not(small_vit):
    model = small_vit(dropout=0.1, attn_dropout=0.1, drop_path=0.2)
    x = torch.randn(2, 1, 28, 28)
    assert not torch.equal(model(x), model(x))
    model.eval()
    assert torch.equal(model(x), model(x))


def test_rectangular_images():
    """image_size=(H, W): a grid of (H/P) x (W/P) patches; the same as set_image_size on a square model."""
    torch.manual_seed(0)
    model = VisionTransformer(
        image_size=(16, 24), patch_size=8, in_channels=1, num_classes=3, dim=32, depth=1, heads=2, mlp_dim=64
    )
    assert model.num_patches == 6 and model.image_size == (16, 24)
    assert model(torch.randn(2, 1, 16, 24)).shape == (2, 3)
    with pytest.raises(ValueError, match="built for 16x24 images"):
        model(torch.randn(2, 1, 24, 16))
    with pytest.raises(ValueError, match="does not divide"):
        VisionTransformer(image_size=(16, 20), patch_size=8, dim=32, depth=1, heads=2, mlp_dim=64)
