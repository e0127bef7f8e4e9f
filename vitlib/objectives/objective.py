"""What a training run minimises, behind one interface that the loop and the evaluation call:

    objective = get_objective("classify", label_smoothing=0.1)     # or "mae", "mpp", "token"
    loss, correct, logits = objective.loss(net, images, labels)    # correct / logits: None where there are none

The others wrap the ViT and return their own loss; a model names its objective (`objective_name`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

OBJECTIVES = ("classify", "mae", "mpp", "token")


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-sum_k t_k log softmax(logits)_k over the last axis: the cross-entropy with a soft target t."""
    return -(targets * logits.float().log_softmax(-1)).sum(-1)


class StepLoss(NamedTuple):
    loss: torch.Tensor  # the mean over the batch, or the sum with reduction="sum"
    correct: torch.Tensor | None  # correct predictions in the batch (summed), or None
    logits: torch.Tensor | None  # the class scores of a classifier, or None


@dataclass(frozen=True)
class Classification:
    """Cross-entropy of net(images) against the labels (or soft targets from mixup / cutmix)."""

    label_smoothing: float = 0.0
    name, uses_labels, has_accuracy, random_masks = "classify", True, True, False

    def loss(self, net: nn.Module, images: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> StepLoss:
        logits = net(images).float()
        loss = F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing, reduction=reduction)
        hard = targets.argmax(1) if targets.ndim == 2 else targets
        return StepLoss(loss, (logits.argmax(1) == hard).sum(), logits)


@dataclass(frozen=True)
class SelfSupervised:
    """The wrapped model's own loss: net(images) -> (mean loss, accuracy or other outputs); its random masks are seeded
    per step by the loop (resumable) and fixed per batch by the evaluation (`random_masks`)."""

    name: str
    has_accuracy: bool
    uses_labels, random_masks = False, True

    def loss(self, net: nn.Module, images: torch.Tensor, targets=None, reduction: str = "mean") -> StepLoss:
        out = net(images)
        loss = out[0] * len(images) if reduction == "sum" else out[0]
        return StepLoss(loss, out[1] * len(images) if self.has_accuracy else None, None)


@dataclass(frozen=True)
class Supervised:
    """A wrapped model's own loss given the labels: net(images, labels, reduction=...) -> StepLoss (token labelling)."""

    name: str
    uses_labels, has_accuracy, random_masks = True, True, False

    def loss(self, net: nn.Module, images: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> StepLoss:
        return StepLoss(*net(images, targets, reduction=reduction))


def get_objective(name: str, label_smoothing: float = 0.0):
    """The objective called `name` (OBJECTIVES); `label_smoothing`: classification's (the others take none)."""
    if name == "classify":
        return Classification(label_smoothing)
    if name == "token":
        return Supervised(name)
    if name in ("mae", "mpp"):
        return SelfSupervised(name, has_accuracy=name == "mpp")
    raise ValueError(f"unknown objective {name!r}: choose one of {', '.join(OBJECTIVES)}.")


def objective_name(model: nn.Module) -> str:
    """`model`'s `objective_name` (through DDP, EMA and torch.compile wrappers), or 'classify'."""
    model = getattr(model, "module", model)  # DDP, EMA (AveragedModel)
    model = getattr(model, "_orig_mod", model)  # torch.compile
    return getattr(model, "objective_name", "classify")
