"""Hybrid architecture (section 3.1): the input sequence is a CNN feature map cut into 1x1 patches, projected by E."""

from __future__ import annotations

import torch
from torch import nn

from ..utils import pair
from .cnn import TORCHVISION_RESNETS, SmallResNet, parse_small_resnet, torchvision_resnet

# torchvision ResNet stages and the total stride after each: stem (conv1 + maxpool) = 4, layer1..4 = 4, 8, 16, 32.
_STAGE_STRIDES = {4: 1, 8: 2, 16: 3, 32: 4}


class HybridEmbedding(nn.Module):
    """x -> CNN feature map (B, C', H/S, W/S) -> N = HW/S^2 tokens of C' features -> E (1x1 patches, D wide)."""

    def __init__(self, *, backbone: nn.Module, image_size: int, in_channels: int, dim: int, stride: int):
        super().__init__()
        self.image_size, self.in_channels, self.patch_size, self.backbone = image_size, in_channels, stride, backbone
        with torch.no_grad():
            was_training = backbone.training
            fmap = backbone.eval()(torch.zeros(1, in_channels, *pair(image_size, "image_size")))
            backbone.train(was_training)
        self.feature_channels, self.grid = fmap.shape[1], tuple(fmap.shape[-2:])
        self.num_patches = self.grid[0] * self.grid[1]
        self.proj = nn.Linear(self.feature_channels, dim)  # E applied to 1x1 patches of the feature map

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(self.backbone(images).flatten(2).transpose(1, 2))

    def resize(self, image_size: int | tuple[int, int]) -> None:
        raise NotImplementedError("a hybrid model cannot change its image size; build a new model instead.")


# ------------------------------------------------------------------------------------------ small stems (28/32 px)
# torchvision's stem leaves a 28x28 image 7x7 positions; a small ResNet (CIFAR design) keeps resolution and channels.
_SMALL_STAGES = {1: 1, 2: 2, 4: 3}  # total stride S -> stages of the small ResNet kept


def small_resnet_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The stem and stages of a small ResNet ('ResNet-8': width w=16) to stride 1, 2 or 4: w, 2w or 4w channels."""
    if (small := parse_small_resnet(name)) is None:
        raise ValueError(
            f"unknown small hybrid backbone {name!r}: use 'ResNet-<depth>[-w<width>]' with depth 6n+2 "
            f"(8, 14, 20, ...), e.g. 'ResNet-8' or 'ResNet-8-w8'."
        )
    if stride not in _SMALL_STAGES:
        raise ValueError(
            f"a hybrid's patch size is the CNN's total stride: a small ResNet stem has stride "
            f"one of {sorted(_SMALL_STAGES)} (after stage 1, 2 or 3), got {stride}."
        )
    depth, width = small
    net = SmallResNet(depth, width, in_channels, num_classes=1)
    return nn.Sequential(*net.stem, *net.blocks[: (depth - 2) // 6 * _SMALL_STAGES[stride]])


def hybrid_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The CNN of a hybrid by name: a small ResNet (`small_resnet_stem`, stride 1-4), or torchvision's ResNet up to
    total stride 4-32, as it is (its weights load), not the paper's R50 (Group Norm, weight standardisation)."""
    if parse_small_resnet(name):
        return small_resnet_stem(name, stride, in_channels)
    if name not in TORCHVISION_RESNETS:
        raise ValueError(
            f"unknown hybrid backbone {name!r}: choose one of {', '.join(TORCHVISION_RESNETS)} (torchvision, "
            f"for large images), or a small ResNet 'ResNet-<6n+2>[-w<width>]' such as 'ResNet-8' or "
            f"'ResNet-8-w8' (for 28/32 px images; the names R8+ViT-Micro/4 and R8-w8+ViT-Micro/4 build them)."
        )
    if stride not in _STAGE_STRIDES:
        raise ValueError(
            f"a hybrid's patch size is the CNN's total stride and must be one of "
            f"{sorted(_STAGE_STRIDES)}, got {stride}."
        )
    net = torchvision_resnet(name, in_channels)
    layers = [net.conv1, net.bn1, net.relu, net.maxpool]
    layers += [getattr(net, f"layer{i}") for i in range(1, _STAGE_STRIDES[stride] + 1)]
    return nn.Sequential(*layers)
