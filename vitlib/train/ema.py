"""An exponential moving average of the weights, evaluated instead of them (`TrainConfig.ema`):
theta_ema <- decay * theta_ema + (1 - decay) * theta after every optimizer step; buffers are copied.

torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn computes the same numbers, but reads its step counter
`n_averaged` on the host and copies it to the GPU at every update: two waits for the GPU per training step. Here the
counter stays a CPU tensor that is only ever read on the CPU, and the update is one `torch._foreach_lerp_`."""

from __future__ import annotations

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel


class EMA(AveragedModel):
    """AveragedModel(model) with an exponential moving average of decay `decay` whose update never syncs."""

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
