"""Small CNN stems for the hybrid (section 3.1) on 28/32 px images: names, shapes, 1x1 patches, parameters, FLOPs."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import vitlib
from vitlib import create_model, parse_name
from vitlib.analysis.cost import model_flops
from vitlib.model.cnn import SmallResNet, is_cnn_name, parse_small_resnet
from vitlib.model.hybrid import HybridEmbedding, hybrid_stem, small_resnet_stem


def test_names():
    """One spelling of the small ResNet everywhere: 'ResNet-8[-w<width>]', the CNN baseline's name too."""
    assert parse_name("R8+ViT-Micro/4")["hybrid"] == "ResNet-8"
    assert parse_name("R8-w8+ViT-Micro/4") == dict(vitlib.VARIANTS["Micro"], patch_size=4, hybrid="ResNet-8-w8")
    assert parse_name("R8-w16+ViT-Micro/4")["hybrid"] == "ResNet-8"  # 16 is the default width
    assert parse_name("R50+ViT-B/16")["hybrid"] == "resnet50"  # torchvision's names keep their meaning
    assert parse_small_resnet("ResNet-8") == (8, 16) and parse_small_resnet("ResNet-20-w32") == (20, 32)
    assert parse_small_resnet("resnet50") is None and parse_small_resnet("resnet8") is None
    assert is_cnn_name("ResNet-8-w8") and is_cnn_name("resnet50") and not is_cnn_name("resnet8")
    assert isinstance(create_model("R50+ViT-Micro/16", image_size=32).patch_embed.backbone[1], torch.nn.BatchNorm2d)


@pytest.mark.parametrize("stride,channels", [(1, 16), (2, 32), (4, 64)])
@pytest.mark.parametrize("size", [28, 32])
def test_tokens_are_the_positions_of_the_feature_map(stride, channels, size):
    model = create_model(f"R8+ViT-Micro/{stride}", num_classes=10, image_size=size, in_channels=1, depth=1).eval()
    embed = model.patch_embed
    assert isinstance(embed, HybridEmbedding) and embed.patch_size == stride
    assert embed.feature_channels == channels
    assert embed.grid == (size // stride, size // stride) and model.num_patches == (size // stride) ** 2
    x = torch.randn(2, 1, size, size)
    assert embed(x).shape == (2, (size // stride) ** 2, 64)
    assert model.forward_features(x).shape == (2, (size // stride) ** 2 + 1, 64)
    assert model(x).shape == (2, 10)


def test_hybrid_embedding_is_a_linear_map_of_1x1_patches():
    torch.manual_seed(0)
    model = create_model("R8-w4+ViT-Micro/4", num_classes=10, image_size=28, in_channels=1).eval()
    x = torch.randn(3, 1, 28, 28)
    fmap = model.patch_embed.backbone(x)  # (B, C', 7, 7)
    assert fmap.shape == (3, 16, 7, 7)
    by_hand = (
        fmap.permute(0, 2, 3, 1).reshape(3, 49, 16) @ model.patch_embed.proj.weight.T + model.patch_embed.proj.bias
    )
    torch.testing.assert_close(model.patch_embed(x), by_hand)
    # a plain ViT patch embedding with P = 1 on the feature map
    one_by_one = vitlib.PatchEmbedding(image_size=7, patch_size=1, in_channels=16, dim=64)
    with torch.no_grad():  # E as timm's 1x1 convolution
        one_by_one.proj.weight.copy_(model.patch_embed.proj.weight[..., None, None])
        one_by_one.proj.bias.copy_(model.patch_embed.proj.bias)
    torch.testing.assert_close(one_by_one(fmap), by_hand)


def test_stem_is_the_small_resnet_up_to_its_stride():
    stem = small_resnet_stem("ResNet-14-w8", 4, in_channels=1)
    cnn = SmallResNet(14, 8, in_channels=1, num_classes=10)
    assert sum(p.numel() for p in stem.parameters()) == sum(
        p.numel() for n, p in cnn.named_parameters() if not n.startswith("head")
    )
    assert sum(p.numel() for p in small_resnet_stem("ResNet-8", 1, 1).parameters()) == 144 + 32 + 2 * (2304 + 32)


def test_parameter_count():
    vit = create_model("ViT-Micro/4", num_classes=10, image_size=28, in_channels=1)
    hyb = create_model("R8-w4+ViT-Micro/4", num_classes=10, image_size=28, in_channels=1)
    stem = sum(p.numel() for p in hyb.patch_embed.backbone.parameters())
    # same transformer; the embedding E maps C' = 16 features instead of P^2 C = 16 pixels: only the stem differs
    assert vitlib.count_parameters(hyb) - vitlib.count_parameters(vit) == stem


def test_flops_match_the_flop_counter():
    for name in ("R8-w4+ViT-Micro/4", "R8+ViT-Micro/2", "ViT-Micro/4"):
        model = create_model(name, num_classes=10, image_size=28, in_channels=1, fused=False).eval()
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            model(torch.zeros(1, 1, 28, 28))
        flops = model_flops(model)
        assert flops["total"] == counter.get_total_flops()
        assert (flops["stem"] > 0) == name.startswith("R")


def test_errors():
    with pytest.raises(ValueError, match="stride one of \\[1, 2, 4\\] .*got 8"):
        create_model("R8+ViT-Micro/8", image_size=32)
    with pytest.raises(ValueError, match="'ResNet-9'.*6n\\+2"):
        create_model("R9+ViT-Micro/4", image_size=28)
    with pytest.raises(ValueError, match="unknown hybrid backbone 'resnet19'"):
        hybrid_stem("resnet19", 4)
    with pytest.raises(ValueError, match="unknown small hybrid backbone 'resnet18'"):
        small_resnet_stem("resnet18", 4)
    with pytest.raises(ValueError, match="width of a small ResNet must be at least 1"):
        small_resnet_stem("ResNet-8-w0", 4)
    with pytest.raises(ValueError, match="unknown model variant 'R8w8\\+ViT-Micro/4'.*R8\\+ViT-Micro/4"):
        parse_name("R8w8+ViT-Micro/4")
    with pytest.raises(
        ValueError, match="one of \\[4, 8, 16, 32\\], got 2"
    ):  # torchvision stems keep their own strides
        create_model("R18+ViT-Micro/2", image_size=28)
