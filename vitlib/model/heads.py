"""Classification heads (section 3.1-3.2): an MLP with one tanh hidden layer for pre-training, a zero-initialised
D x K linear layer for fine-tuning."""

from __future__ import annotations

import torch
from torch import nn


class ClassifierHead(nn.Module):
    """y = W (tanh(W_pre z) if hidden else z) + b. `zero_init` starts the last layer at zero, as for fine-tuning."""

    def __init__(self, *, dim: int, num_classes: int, hidden: int | None = None, zero_init: bool = True):
        super().__init__()
        self.pre_logits = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh()) if hidden else nn.Identity()
        self.fc = nn.Linear(hidden or dim, num_classes) if num_classes > 0 else nn.Identity()
        if zero_init and num_classes > 0:
            nn.init.zeros_(self.fc.weight)
            nn.init.zeros_(self.fc.bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pre_logits(z))


def pretraining_head(dim: int, num_classes: int) -> ClassifierHead:
    """The pre-training head: one hidden layer of width D with tanh."""
    return ClassifierHead(dim=dim, num_classes=num_classes, hidden=dim, zero_init=False)


def finetuning_head(dim: int, num_classes: int) -> ClassifierHead:
    """The fine-tuning head: a single zero-initialised D x K linear layer (section 3.2)."""
    return ClassifierHead(dim=dim, num_classes=num_classes, hidden=None, zero_init=True)
