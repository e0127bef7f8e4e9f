"""Self-supervised pre-training (section 4.6) in one call: `vitlib.train.train` with an objective that returns its
own loss (`MaskedPatchPrediction`, `MAE`) — the same loop, optimiser (AdamW, linear warm-up, cosine decay, clipping
at global norm 1), checkpoints and `torchrun` as supervised training; labels are never looked at. Then fine-tune the
ViT inside the objective with `vitlib.train`.

    history = pretrain(MAE(vit), data, TrainConfig(epochs=10, batch_size=256, lr=1.5e-3, progress=False))
"""

from __future__ import annotations

import dataclasses

from torch import nn

from ..data import Dataset
from ..objectives import objective_name
from ..train import TrainConfig, train


def pretrain(objective: nn.Module, data: Dataset, cfg: TrainConfig) -> list[dict]:
    """Minimise objective(images) -> (loss, ...) over data.train with cfg's recipe (epochs or steps, batch, AdamW,
    warm-up and decay, clipping, augmentation, seed, device, progress, ...); returns one row per epoch (loss, time_s).
    The objective is the model's (cfg.objective follows it), and nothing is evaluated: a pre-training loss only."""
    kind = objective_name(objective)
    if kind == "classify":
        raise TypeError(
            f"pretrain takes a self-supervised objective (vitlib.objectives.MAE or "
            f"MaskedPatchPrediction), got {type(objective).__name__}; train a classifier with "
            f"vitlib.train.train."
        )
    run_cfg = dataclasses.replace(cfg, objective=kind, eval_every=0, eval_test=False)
    result = train(run_cfg, model=objective, data=data)
    return [{"epoch": r["epoch"], "loss": r["train_loss"], "time_s": r["time_s"]} for r in result.history]
