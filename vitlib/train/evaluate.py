"""Mean loss and accuracy of a model over a loader, with the objective it is trained with."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from ..data import batch_seed
from ..objectives import get_objective, objective_name


@torch.no_grad()
def evaluate(model: nn.Module, loader, dtype: torch.dtype | None = None, return_predictions: bool = False) -> dict:
    """{'loss', 'acc' (not for MAE), 'n'} over a loader (all processes' shares summed under DDP); with
    return_predictions, also the 'predictions' and 'labels' of a classifier. The self-supervised objectives hide the
    same patches at every evaluation (a fixed seed per batch). Under DDP or FSDP every process calls it with its
    loader (FSDP gathers each block's weights for the forward: a collective)."""
    model.eval()
    device = loader.device
    objective = get_objective(objective_name(model))
    totals = torch.zeros(3, device=device, dtype=torch.float64)  # loss sum, correct, count
    preds, labels = [], []
    for step, (images, y) in enumerate(loader.epoch(0)):
        with torch.random.fork_rng(devices=None if objective.random_masks else []):
            if objective.random_masks:
                torch.manual_seed(batch_seed(0, 0, step))
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss, correct, logits = objective.loss(model, images, y, reduction="sum")
        totals[0] += loss.double()
        if correct is not None:
            totals[1] += correct.double()
        totals[2] += len(y)
        if return_predictions and logits is not None:
            preds.append(logits.argmax(1).cpu())
            labels.append(y.cpu())
    if dist.is_initialized():
        dist.all_reduce(totals)
    loss, correct, count = totals.tolist()
    out = {"loss": loss / max(count, 1), "acc": correct / max(count, 1), "n": int(count)}
    if not objective.has_accuracy:
        del out["acc"]
    if return_predictions and preds:
        out["predictions"], out["labels"] = torch.cat(preds), torch.cat(labels)
    return out
