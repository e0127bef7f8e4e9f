"""Self-supervised pre-training loop (section 4.6): the same optimiser and schedule as `vitlib.train` (AdamW,
linear warm-up, cosine decay, clipping at global norm 1), driven by an objective that returns its own loss
(`MaskedPatchPrediction`, `MAE`); labels are never looked at. Then fine-tune the ViT with `vitlib.train`."""
from __future__ import annotations

import time

import torch
from torch import nn
from tqdm.auto import tqdm

from .datasets import Dataset
from .train import TrainConfig, lr_lambda, make_loader, param_groups, resolve_device


def pretrain(objective: nn.Module, data: Dataset, epochs: int = 10, batch_size: int = 256, lr: float = 1.5e-3,
             weight_decay: float = 0.05, warmup_epochs: float = 1.0, min_lr: float = 1e-5, grad_clip: float = 1.0,
             augment: str = "none", seed: int = 0, device: str = "auto", progress: bool = False) -> list[dict]:
    """Minimise objective(images) -> (loss, ...) over data.train; returns one row per epoch (loss, time_s)."""
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"need epochs >= 1, batch_size >= 1 and lr > 0, got {epochs}, {batch_size}, {lr}.")
    cfg = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, min_lr=min(min_lr, lr), weight_decay=weight_decay,
                      warmup_epochs=warmup_epochs, augment=augment, seed=seed, device=device)
    dev = resolve_device(device)
    torch.manual_seed(seed)
    objective = objective.to(dev).train()
    loader = make_loader(data.train, data, cfg, True, dev)
    steps = len(loader)
    if steps == 0:
        raise ValueError(f"the training set ({len(data.train)} images) is smaller than one batch ({batch_size}).")
    optimizer = torch.optim.AdamW(param_groups(objective, weight_decay), lr=lr, betas=(0.9, 0.999),
                                  fused=dev.type == "cuda")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, epochs * steps, max(1, round(warmup_epochs * steps))))
    generator = torch.Generator().manual_seed(seed + 1)
    history, started = [], time.perf_counter()
    for epoch in range(epochs):
        total = torch.zeros((), device=dev, dtype=torch.float64)
        for images, _ in tqdm(loader.epoch(epoch), total=steps, desc=f"pre-train {epoch + 1}/{epochs}", disable=not progress):
            loss = objective(images, generator=generator)[0]
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip > 0:
                nn.utils.clip_grad_norm_(objective.parameters(), grad_clip)
            optimizer.step()
            scheduler.step()
            total += loss.detach()
        row = {"epoch": epoch + 1, "loss": float(total) / steps, "time_s": time.perf_counter() - started}
        if not torch.isfinite(torch.tensor(row["loss"])):
            raise FloatingPointError(f"the pre-training loss became non-finite in epoch {epoch + 1}: lower lr.")
        history.append(row)
    return history
