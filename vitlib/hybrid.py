"""Hybrid architecture (section 3.1): the input sequence is a CNN feature map cut into 1x1 patches and projected by E."""
from __future__ import annotations

import re

import torch
import torchvision
from torch import nn

from .cnn import SmallResNet

# torchvision ResNet stages and the total stride after each: stem (conv1 + maxpool) = 4, layer1..4 = 4, 8, 16, 32.
_STAGE_STRIDES = {4: 1, 8: 2, 16: 3, 32: 4}
RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")


def resnet_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The stages of a randomly initialised torchvision ResNet up to total stride `stride` (4, 8, 16 or 32).

    The paper's R50 uses Group Norm and weight standardisation (BiT) and a modified stage 3; this keeps torchvision's
    ResNet as it is, so its ImageNet weights can be loaded with `load_state_dict`.
    """
    if name not in RESNETS:
        raise ValueError(f"unknown hybrid backbone {name!r}: choose one of {', '.join(RESNETS)}.")
    if stride not in _STAGE_STRIDES:
        raise ValueError(f"a hybrid's patch size is the CNN's total stride and must be one of {sorted(_STAGE_STRIDES)}, got {stride}.")
    net = getattr(torchvision.models, name)(weights=None)
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    layers = [net.conv1, net.bn1, net.relu, net.maxpool]
    layers += [getattr(net, f"layer{i}") for i in range(1, _STAGE_STRIDES[stride] + 1)]
    return nn.Sequential(*layers)


class HybridEmbedding(nn.Module):
    """x -> CNN feature map (B, C', H/S, W/S) -> N = HW/S^2 tokens of C' features -> E (1x1 patches, D wide)."""

    def __init__(self, backbone: nn.Module, image_size: int, in_channels: int, dim: int, stride: int):
        super().__init__()
        self.image_size, self.in_channels, self.patch_size = image_size, in_channels, stride
        self.backbone = backbone
        with torch.no_grad():
            was_training = backbone.training
            h, w = (image_size, image_size) if isinstance(image_size, int) else image_size
            fmap = backbone.eval()(torch.zeros(1, in_channels, h, w))
            backbone.train(was_training)
        self.feature_channels = fmap.shape[1]
        self.grid = tuple(fmap.shape[-2:])
        self.num_patches = self.grid[0] * self.grid[1]
        self.proj = nn.Linear(self.feature_channels, dim)  # E applied to 1x1 patches of the feature map

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(self.backbone(images).flatten(2).transpose(1, 2))


# ------------------------------------------------------------------------------------------ small stems (28/32 px)
# torchvision's stems halve the image twice at once (7x7 conv stride 2, max-pool) and start at 64 channels: for a
# 28x28 grayscale image that leaves 7x7 positions after the very first block. A small ResNet of the CIFAR design
# (vitlib.cnn.SmallResNet: a 3x3 stem, stages of width w, 2w, 4w at stride 1, 2, 2) keeps the resolution and the
# channels small. Its stages up to total stride S make the hybrid's CNN; S is the hybrid's "patch size".
_SMALL_STAGES = {1: 1, 2: 2, 4: 3}  # total stride S -> stages of the small ResNet kept
_SMALL_NAME = re.compile(r"^resnet(?P<depth>\d+)(?:-w(?P<width>\d+))?$")


def is_small_resnet(name: str) -> bool:
    """'resnet8', 'resnet14-w8', ...: a small ResNet (6n+2 layers); torchvision's names (RESNETS) are not."""
    m = _SMALL_NAME.match(name or "")
    return bool(m) and name not in RESNETS and (int(m["depth"]) - 2) % 6 == 0 and int(m["depth"]) >= 8


def small_resnet_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The 3x3 stem and the stages of a small ResNet-(6n+2) of width w ('resnet8' = w 16, 'resnet8-w8' = w 8) up to
    total stride `stride` (1, 2 or 4): the feature map has w, 2w or 4w channels and (H/S, W/S) positions."""
    m = _SMALL_NAME.match(name or "")
    if not m or not is_small_resnet(name):
        raise ValueError(f"unknown small hybrid backbone {name!r}: use 'resnet<depth>[-w<width>]' with depth 6n+2 "
                         f"(8, 14, 20, ...) and not a torchvision name, e.g. 'resnet8' or 'resnet8-w8'.")
    if stride not in _SMALL_STAGES:
        raise ValueError(f"a hybrid's patch size is the CNN's total stride: a small ResNet stem has stride "
                         f"one of {sorted(_SMALL_STAGES)} (after stage 1, 2 or 3), got {stride}.")
    n, width = (int(m["depth"]) - 2) // 6, int(m["width"] or 16)
    if width < 1:
        raise ValueError(f"the width of a small ResNet stem must be at least 1, got {width} in {name!r}.")
    net = SmallResNet(int(m["depth"]), width, in_channels, num_classes=1)  # the CIFAR-design ResNet of vitlib.cnn
    return nn.Sequential(*net.stem, *net.blocks[:n * _SMALL_STAGES[stride]])


def hybrid_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The CNN of a hybrid by name: a torchvision ResNet (`resnet_stem`, stride 4-32) or a small one
    (`small_resnet_stem`, stride 1-4)."""
    if name in RESNETS:
        return resnet_stem(name, stride, in_channels)
    if is_small_resnet(name):
        return small_resnet_stem(name, stride, in_channels)
    raise ValueError(f"unknown hybrid backbone {name!r}: choose one of {', '.join(RESNETS)} (torchvision, for large "
                     f"images), or a small ResNet 'resnet<6n+2>[-w<width>]' such as 'resnet8' or 'resnet8-w8' (for "
                     f"28/32 px images; name R8+ViT-Micro/4 or R8-w8+ViT-Micro/4).")


def stem_flops(backbone: nn.Module, image_size: int | tuple[int, int], in_channels: int) -> int:
    """FLOPs of the CNN stem on one image, measured with torch.utils.flop_counter.FlopCounterMode (convolutions and
    matrix multiplications, 2 per multiply-add, the convention of vitlib.flops; batch norm and ReLU left out)."""
    from torch.utils.flop_counter import FlopCounterMode

    h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    was_training = backbone.training
    x = torch.zeros(1, in_channels, h, w, device=next(backbone.parameters()).device)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        backbone.eval()(x)
    backbone.train(was_training)
    return int(counter.get_total_flops())


def hybrid_flops(model: nn.Module) -> dict[str, int]:
    """Forward FLOPs per image of a vitlib VisionTransformer, hybrid or not (vitlib.flops.model_flops counts only
    plain ViTs): 'stem' (the CNN, measured; 0 for a plain ViT), the parts of vitlib.flops.PARTS and 'total'.

    A hybrid is counted as what section 3.1 says it is: the CNN, then a plain ViT whose input "image" is the feature
    map (C' channels, H/S x W/S) cut into patches of size 1x1, so its patch embedding costs 2 N C' D.
    """
    from .flops import model_flops, vit_flops  # here: vitlib.flops imports vitlib.model, which imports this module

    embed = getattr(model, "patch_embed", None)
    if not isinstance(embed, HybridEmbedding):
        return {"stem": 0, **model_flops(model)}
    config = dict(model.config, hybrid=None, image_size=embed.grid, patch_size=1, in_channels=embed.feature_channels)
    rest = vit_flops(**config)
    stem = stem_flops(embed.backbone, model.config["image_size"], model.config["in_channels"])
    return {"stem": stem, **{k: v for k, v in rest.items() if k != "total"}, "total": stem + rest["total"]}
