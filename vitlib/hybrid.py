"""Hybrid architecture (section 3.1): the input sequence is a CNN feature map cut into 1x1 patches and projected by E."""
from __future__ import annotations

import torch
import torchvision
from torch import nn

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
