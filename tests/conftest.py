"""Shared fixtures: the repository on sys.path, a fixed seed for every test, and a small-ViT factory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # vitlib is used from the checkout, installed or not
    sys.path.insert(0, str(ROOT))

import vitlib  # noqa: E402
from vitlib.train import TrainConfig  # noqa: E402

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


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def small_vit():
    """small_vit(**overrides) -> a VisionTransformer with SMALL's sizes (and a random head unless told otherwise)."""

    def make(random_head: bool = True, **overrides) -> vitlib.VisionTransformer:
        model = vitlib.VisionTransformer(**{**SMALL, **overrides})
        if random_head:
            randomise_(model.head)
        return model

    return make


@torch.no_grad()
def randomise_(module: torch.nn.Module, std: float = 0.5) -> torch.nn.Module:
    """Overwrite every parameter with N(0, std^2): zero-initialised heads would make logit comparisons vacuous."""
    for p in module.parameters():
        p.normal_(0.0, std)
    return module


@pytest.fixture
def randomise():
    return randomise_


@pytest.fixture(scope="module")
def one_thread():
    """These models are tiny: one thread is as fast, and immune to a busy machine (two-thread OpenMP runs slow down
    ~50x when another process holds a core, measured on 2 cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
