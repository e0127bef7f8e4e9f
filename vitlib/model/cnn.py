"""CNN baselines (section 4.3): a small ResNet for 28/32 px (CIFAR design, 6n+2 layers), torchvision's for larger."""

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
        self.stem = nn.Sequential(nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        outs = [width * 2**stage for stage in range(3) for _ in range((depth - 2) // 6)]  # n blocks of w, 2w, 4w
        self.blocks = nn.Sequential(*[BasicBlock(a, b, 1 if a == b else 2) for a, b in zip([width, *outs], outs)])
        self.head = nn.Linear(4 * width, num_classes)
        self.config = dict(
            kind="SmallResNet", depth=depth, width=width, in_channels=in_channels, num_classes=num_classes
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


# One spelling for the small ResNet everywhere (a baseline, a hybrid's stem), and torchvision's names for large images.
_SMALL = re.compile(r"^ResNet-(\d+)(?:-w(\d+))?$")
TORCHVISION_RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")


def parse_small_resnet(name: str) -> tuple[int, int] | None:
    """'ResNet-8' -> (8, 16), 'ResNet-20-w32' -> (20, 32); None for another name; an error for a bad depth or width."""
    if not (m := _SMALL.match(name or "")):
        return None
    depth, width = int(m[1]), int(m[2] or 16)
    if (depth - 2) % 6 or depth < 8:
        raise ValueError(f"{name!r}: a small ResNet has 6n+2 layers (8, 14, 20, 26, 32, ...), got depth {depth}.")
    if width < 1:
        raise ValueError(f"{name!r}: the width of a small ResNet must be at least 1.")
    return depth, width


def small_resnet_name(depth: int, width: int | None = None) -> str:
    """The canonical name of a small ResNet: 'ResNet-8', 'ResNet-8-w8' (checked)."""
    name = f"ResNet-{depth}" + (f"-w{width}" if width is not None and width != 16 else "")
    parse_small_resnet(name)
    return name


def is_cnn_name(name: str) -> bool:
    return name in TORCHVISION_RESNETS or bool(_SMALL.match(name or ""))


def torchvision_resnet(name: str, in_channels: int = 3, num_classes: int = 1000) -> nn.Module:
    """torchvision's ResNet `name`, randomly initialised, its first convolution taking `in_channels` channels."""
    net = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    return net


def create_cnn(name: str, num_classes: int, in_channels: int = 3) -> nn.Module:
    """'ResNet-8', 'ResNet-20-w32' (small, for 28/32 px) or a torchvision name such as 'resnet18', 'resnet50'."""
    if small := parse_small_resnet(name):
        return SmallResNet(*small, in_channels, num_classes)
    if name not in TORCHVISION_RESNETS:
        raise ValueError(
            f"unknown CNN {name!r}: use 'ResNet-<6n+2>[-w<width>]' (e.g. ResNet-8, ResNet-20-w32) or a "
            f"torchvision ResNet ({', '.join(TORCHVISION_RESNETS)})."
        )
    net = torchvision_resnet(name, in_channels, num_classes)
    net.config = dict(kind="torchvision", name=name, in_channels=in_channels, num_classes=num_classes)
    return net
