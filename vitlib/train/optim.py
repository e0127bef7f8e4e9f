"""The paper's optimiser (appendix B.1): Adam(W) with beta1 0.9, beta2 0.999 and weight decay on the matrices, a
linear warm-up, then cosine or linear decay (or a constant rate); and an exponential moving average of the weights."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from .config import TrainConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only: not on biases, norms, position embeddings or the [class] token."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim <= 1 or "pos_embed" in name or "cls_token" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_lambda(cfg: TrainConfig, total_steps: int, warmup_steps: int):
    """Linear warm-up, then cosine / linear decay to min_lr or a constant rate (constant, plateau): a factor of lr."""
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
    """Fused kernels on a GPU; foreach elsewhere (the same numbers as PyTorch's default loop, bit for bit)."""
    return {"fused": True} if device.type == "cuda" else {"foreach": True}


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device, total_steps: int, warmup_steps: int):
    """(the optimizer, its LambdaLR schedule): AdamW, or SGD with momentum (cfg.optimizer)."""
    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, **vectorized(device))
    else:
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **vectorized(device))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, total_steps, warmup_steps))


class EMA(AveragedModel):
    """theta_ema <- decay * theta_ema + (1 - decay) * theta after every step, buffers copied: AveragedModel's numbers
    without its host-device sync per update (the counter stays on the CPU, the update is one _foreach_lerp_)."""

    def __init__(self, model: nn.Module, decay: float):
        if not 0 < decay < 1:
            raise ValueError(f"the EMA decay must be between 0 and 1 (e.g. 0.999), got {decay}.")
        super().__init__(model, use_buffers=False)  # n_averaged: a CPU tensor (no device given)
        self.decay = decay

    @torch.no_grad()
    def update_parameters(self, model: nn.Module) -> None:
        mine = [p.detach() for p in self.module.parameters()]
        theirs = [p.detach() for p in model.parameters()]
        if int(self.n_averaged) == 0:  # the first update starts the average at the weights
            torch._foreach_copy_(mine, theirs)
        else:
            torch._foreach_lerp_(mine, theirs, 1.0 - self.decay)
        for b_mine, b_theirs in zip(self.module.buffers(), model.buffers()):
            b_mine.copy_(b_theirs)
        self.n_averaged += 1
