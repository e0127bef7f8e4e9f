"""Hybrid architecture (section 3.1): the input sequence is a CNN feature map cut into 1x1 patches and projected by
E."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

from ..utils import pair
from .cnn import TORCHVISION_RESNETS, SmallResNet, parse_small_resnet

# torchvision ResNet stages and the total stride after each: stem (conv1 + maxpool) = 4, layer1..4 = 4, 8, 16, 32.
_STAGE_STRIDES = {4: 1, 8: 2, 16: 3, 32: 4}


def resnet_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The stages of a randomly initialised torchvision ResNet up to total stride `stride` (4, 8, 16 or 32).

    The paper's R50 uses Group Norm and weight standardisation (BiT) and a modified stage 3; this keeps torchvision's
    ResNet as it is, so its ImageNet weights can be loaded with `load_state_dict`.
    """
    if name not in TORCHVISION_RESNETS:
        raise ValueError(f"unknown hybrid backbone {name!r}: choose one of {', '.join(TORCHVISION_RESNETS)}.")
    if stride not in _STAGE_STRIDES:
        raise ValueError(
            f"a hybrid's patch size is the CNN's total stride and must be one of "
            f"{sorted(_STAGE_STRIDES)}, got {stride}."
        )
    net = getattr(torchvision.models, name)(weights=None)
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    layers = [net.conv1, net.bn1, net.relu, net.maxpool]
    layers += [getattr(net, f"layer{i}") for i in range(1, _STAGE_STRIDES[stride] + 1)]
    return nn.Sequential(*layers)


class HybridEmbedding(nn.Module):
    """x -> CNN feature map (B, C', H/S, W/S) -> N = HW/S^2 tokens of C' features -> E (1x1 patches, D wide)."""

    def __init__(self, *, backbone: nn.Module, image_size: int, in_channels: int, dim: int, stride: int):
        super().__init__()
        self.image_size, self.in_channels, self.patch_size = image_size, in_channels, stride
        self.backbone = backbone
        with torch.no_grad():
            was_training = backbone.training
            h, w = pair(image_size, "image_size")
            fmap = backbone.eval()(torch.zeros(1, in_channels, h, w))
            backbone.train(was_training)
        self.feature_channels = fmap.shape[1]
        self.grid = tuple(fmap.shape[-2:])
        self.num_patches = self.grid[0] * self.grid[1]
        self.proj = nn.Linear(self.feature_channels, dim)  # E applied to 1x1 patches of the feature map

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(self.backbone(images).flatten(2).transpose(1, 2))

    def resize(self, image_size: int | tuple[int, int]) -> None:
        """Another image size is not supported: the CNN's feature grid is measured when the model is built."""
        raise NotImplementedError("a hybrid model cannot change its image size; build a new model instead.")


# ------------------------------------------------------------------------------------------ small stems (28/32 px)
# torchvision's stems halve the image twice at once (7x7 conv stride 2, max-pool) and start at 64 channels: for a
# 28x28 grayscale image that leaves 7x7 positions after the very first block. A small ResNet of the CIFAR design
# (vitlib.model.cnn.SmallResNet: a 3x3 stem, stages of width w, 2w, 4w at stride 1, 2, 2) keeps the resolution and the
# channels small. Its stages up to total stride S make the hybrid's CNN; S is the hybrid's "patch size".
_SMALL_STAGES = {1: 1, 2: 2, 4: 3}  # total stride S -> stages of the small ResNet kept


def small_resnet_stem(name: str, stride: int, in_channels: int = 3) -> nn.Sequential:
    """The 3x3 stem and the stages of a small ResNet-(6n+2) of width w ('ResNet-8' = w 16, 'ResNet-8-w8' = w 8) up to
    total stride `stride` (1, 2 or 4): the feature map has w, 2w or 4w channels and (H/S, W/S) positions."""
    small = parse_small_resnet(name)
    if small is None:
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
    """The CNN of a hybrid by name: a torchvision ResNet (`resnet_stem`, stride 4-32) or a small one
    (`small_resnet_stem`, stride 1-4)."""
    if name in TORCHVISION_RESNETS:
        return resnet_stem(name, stride, in_channels)
    if parse_small_resnet(name):
        return small_resnet_stem(name, stride, in_channels)
    raise ValueError(
        f"unknown hybrid backbone {name!r}: choose one of {', '.join(TORCHVISION_RESNETS)} (torchvision, "
        f"for large images), or a small ResNet 'ResNet-<6n+2>[-w<width>]' such as 'ResNet-8' or "
        f"'ResNet-8-w8' (for 28/32 px images; the names R8+ViT-Micro/4 and R8-w8+ViT-Micro/4 build them)."
    )
