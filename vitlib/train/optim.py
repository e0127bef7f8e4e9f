"""The paper's optimiser (appendix B.1): Adam(W) with beta1 0.9, beta2 0.999 and weight decay on the matrices, a
linear warm-up, then cosine or linear decay (or a constant rate)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import TrainConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only: not on biases, norms, position embeddings or the [class] token."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim <= 1 or "pos_embed" in name or "cls_token" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_lambda(cfg: TrainConfig, total_steps: int, warmup_steps: int):
    """Linear warm-up to lr, then cosine / linear decay to min_lr (as a factor of lr), or a constant rate (schedules
    constant and plateau; the plateau's tenfold drops are made by the loop when the validation accuracy stalls)."""
    floor = cfg.min_lr / cfg.lr

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        t = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        if cfg.schedule == "cosine":
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))
        if cfg.schedule == "linear":
            return floor + (1 - floor) * max(0.0, 1 - t)
        return 1.0

    return factor


def vectorized(device: torch.device) -> dict:
    """The optimizer options for `device`: fused on a GPU; foreach elsewhere (PyTorch's default on a CPU is a Python
    loop over the tensors; foreach gives the same numbers, bit for bit: tests/test_pretraining.py)."""
    return {"fused": True} if device.type == "cuda" else {"foreach": True}


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device, total_steps: int, warmup_steps: int):
    """(the optimizer, its LambdaLR schedule): AdamW, or SGD with momentum (cfg.optimizer); fused kernels on a GPU,
    elsewhere `vectorized` ones: one call per step for all tensors (the same numbers as a loop over them)."""
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, **vectorized(device))
    else:
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **vectorized(device))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, total_steps, warmup_steps))
