"""What a training run minimises, behind one small interface that the loop and the evaluation call:

    objective = get_objective("classify", label_smoothing=0.1)     # or "mae", "mpp", "token"
    loss, correct, logits = objective.loss(net, images, labels)    # correct / logits: None where there are none

Classification is the cross-entropy of the model's logits; the self-supervised objectives (MAE, the paper's masked
patch prediction) are models that wrap the ViT and return their own loss, and never read a label; token labelling
wraps a classifier ViT and a teacher, and returns its loss given the labels. The model says which objective it is
trained with (`objective_name`, MAE, MaskedPatchPrediction and TokenLabelling set it; any other model is a
classifier), so a run cannot train a model with the wrong one.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

OBJECTIVES = ("classify", "mae", "mpp", "token")


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-sum_k t_k log softmax(logits)_k over the last axis: the cross-entropy with a soft target
    (token labelling's per-token targets, DINO's teacher distribution)."""
    return -(targets * logits.float().log_softmax(-1)).sum(-1)


class StepLoss(NamedTuple):
    loss: torch.Tensor  # the mean over the batch, or the sum with reduction="sum"
    correct: torch.Tensor | None  # correct predictions in the batch (summed), or None
    logits: torch.Tensor | None  # the class scores of a classifier, or None


class Classification:
    """Cross-entropy of net(images) against the labels (or soft targets from mixup / cutmix)."""

    name, uses_labels, has_accuracy, random_masks = "classify", True, True, False

    def __init__(self, label_smoothing: float = 0.0):
        self.label_smoothing = label_smoothing

    def loss(self, net: nn.Module, images: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> StepLoss:
        logits = net(images).float()
        loss = F.cross_entropy(logits, targets, label_smoothing=self.label_smoothing, reduction=reduction)
        hard = targets.argmax(1) if targets.ndim == 2 else targets
        return StepLoss(loss, (logits.argmax(1) == hard).sum(), logits)


class SelfSupervised:
    """The wrapped model's own loss: net(images) -> (mean loss, accuracy or other outputs). `random_masks`: the model
    hides random patches, which the loop seeds per step (resumable) and the evaluation fixes per batch."""

    uses_labels, random_masks = False, True

    def __init__(self, name: str, has_accuracy: bool):
        self.name, self.has_accuracy = name, has_accuracy

    def loss(self, net: nn.Module, images: torch.Tensor, targets=None, reduction: str = "mean") -> StepLoss:
        out = net(images)
        loss = out[0] * len(images) if reduction == "sum" else out[0]
        return StepLoss(loss, out[1] * len(images) if self.has_accuracy else None, None)


class Supervised:
    """A wrapped model's own loss given the labels: net(images, labels, reduction=...) -> StepLoss (token
    labelling, whose forward holds the teacher's targets and the [class] and token losses)."""

    uses_labels, has_accuracy, random_masks = True, True, False

    def __init__(self, name: str):
        self.name = name

    def loss(self, net: nn.Module, images: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> StepLoss:
        return StepLoss(*net(images, targets, reduction=reduction))


def get_objective(name: str, label_smoothing: float = 0.0):
    """The objective called `name` (OBJECTIVES); `label_smoothing` is classification's, the other objectives take
    none (a run's label options are checked once, before it starts: `vitlib.train.check_config`)."""
    if name == "classify":
        return Classification(label_smoothing)
    if name == "token":
        return Supervised(name)
    if name in ("mae", "mpp"):
        return SelfSupervised(name, has_accuracy=name == "mpp")
    raise ValueError(f"unknown objective {name!r}: choose one of {', '.join(OBJECTIVES)}.")


def objective_name(model: nn.Module) -> str:
    """Which objective `model` is trained with: its `objective_name`, through DDP, EMA and torch.compile wrappers;
    'classify' for any other model."""
    model = getattr(model, "module", model)  # DDP, EMA (AveragedModel)
    model = getattr(model, "_orig_mod", model)  # torch.compile
    return getattr(model, "objective_name", "classify")
