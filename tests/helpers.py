"""What vitlib's tests build again and again: a tiny run, a tiny ViT's sizes, random weights for a zero head."""

from __future__ import annotations

import torch

from vitlib.train import TrainConfig

# A run of ViT-Micro with 7x7 patches (16 tokens) on 512 bundled images: 8 steps of 64 images an epoch, seconds
TINY_RUN = TrainConfig(
    model="ViT-Micro/7",
    dataset="fashion-mnist-mini",
    subset=512,
    batch_size=64,
    epochs=2,
    lr=3e-3,
    warmup_epochs=0.5,
    val_fraction=0.1,
    log_every=4,
    progress=False,
    eval_test=False,
)

# A ViT small enough to run forward and backward in milliseconds on a CPU: 28x28 grey images, P=4 -> 7x7 = 49 patches.
SMALL = dict(image_size=28, patch_size=4, in_channels=1, num_classes=5, dim=32, depth=2, heads=4, mlp_dim=64)


@torch.no_grad()
def randomise_(module: torch.nn.Module, std: float = 0.5) -> torch.nn.Module:
    """Overwrite every parameter with N(0, std^2): zero-initialised heads would make logit comparisons vacuous."""
    for p in module.parameters():
        p.normal_(0.0, std)
    return module
