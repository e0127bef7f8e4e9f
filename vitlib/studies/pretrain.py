"""Self-supervised pre-training (section 4.6) in one call: `vitlib.train.train` with an objective that returns its
own loss (`MaskedPatchPrediction`, `MAE`) — the same loop, optimiser (AdamW, linear warm-up, cosine decay, clipping
at global norm 1), checkpoints and `torchrun` as supervised training; labels are never looked at. Then fine-tune the
ViT inside the objective with `vitlib.train`."""

from __future__ import annotations

from torch import nn

from ..data import Dataset
from ..objectives import objective_name
from ..train import TrainConfig, train


def pretrain(
    objective: nn.Module,
    data: Dataset,
    epochs: int = 10,
    batch_size: int = 256,
    lr: float = 1.5e-3,
    weight_decay: float = 0.05,
    warmup_epochs: float = 1.0,
    min_lr: float = 1e-5,
    grad_clip: float = 1.0,
    augment: str = "none",
    seed: int = 0,
    device: str = "auto",
    progress: bool = False,
) -> list[dict]:
    """Minimise objective(images) -> (loss, ...) over data.train; returns one row per epoch (loss, time_s)."""
    kind = objective_name(objective)
    if kind == "classify":
        raise TypeError(
            f"pretrain takes a self-supervised objective (vitlib.objectives.MAE or "
            f"MaskedPatchPrediction), got {type(objective).__name__}; train a classifier with "
            f"vitlib.train.train."
        )
    cfg = TrainConfig(
        objective=kind,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        min_lr=min(min_lr, lr),
        weight_decay=weight_decay,
        warmup_epochs=warmup_epochs,
        grad_clip=grad_clip,
        augment=augment,
        seed=seed,
        device=device,
        progress=progress,
        eval_every=0,
        eval_test=False,
    )
    result = train(cfg, model=objective, data=data)
    return [{"epoch": r["epoch"], "loss": r["train_loss"], "time_s": r["time_s"]} for r in result.history]
