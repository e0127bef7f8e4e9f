"""CNN baselines for the inductive-bias comparison (section 4.3): a small ResNet for 28x28 / 32x32 inputs
(He et al. 2016, the CIFAR design: 3 stages, 6n+2 layers) and torchvision's ResNets for larger images."""
from __future__ import annotations

import re

import torch
import torchvision
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class SmallResNet(nn.Module):
    """ResNet-(6n+2) for small images: a 3x3 stem, three stages of n blocks (width w, 2w, 4w; stride 1, 2, 2), GAP."""

    def __init__(self, depth: int = 8, width: int = 16, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"a small ResNet has 6n+2 layers (8, 14, 20, 32, 56, ...), got depth {depth}.")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks, cin = [], width
        for stage, cout in enumerate((width, 2 * width, 4 * width)):
            for i in range(n):
                blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, num_classes)
        self.config = dict(kind="SmallResNet", depth=depth, width=width, in_channels=in_channels, num_classes=num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


_SMALL = re.compile(r"^ResNet-(\d+)(?:-w(\d+))?$")


def is_cnn_name(name: str) -> bool:
    return bool(_SMALL.match(name)) or name in torchvision.models.list_models(module=torchvision.models) and name.startswith("resnet")


def create_cnn(name: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """'ResNet-8', 'ResNet-20-w32' (small, for 28/32 px) or a torchvision name such as 'resnet18', 'resnet50'."""
    m = _SMALL.match(name)
    if m:
        return SmallResNet(int(m[1]), int(m[2] or 16), in_channels, num_classes)
    if not is_cnn_name(name):
        raise ValueError(f"unknown CNN {name!r}: use 'ResNet-<6n+2>[-w<width>]' (e.g. ResNet-8, ResNet-20-w32) or a "
                         f"torchvision ResNet (resnet18, resnet34, resnet50, ...).")
    net = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    net.config = dict(kind="torchvision", name=name, in_channels=in_channels, num_classes=num_classes)
    return net
