"""vitlib's fixtures: a small-ViT factory and a way to randomise a module (the shared ones: ../conftest.py)."""

from __future__ import annotations

import pytest
from helpers import SMALL, randomise_

import vitlib


@pytest.fixture
def small_vit():
    """small_vit(**overrides) -> a ViT with SMALL's sizes (and a random head unless told otherwise); `fused` and
    `conv_patch_embed` choose how it runs."""

    def make(random_head: bool = True, fused: bool = True, conv_patch_embed: bool = True, **overrides):
        config = vitlib.ViTConfig(**{**SMALL, **overrides})
        model = vitlib.build_vit(config, fused=fused, conv_patch_embed=conv_patch_embed)
        if random_head:
            randomise_(model.head)
        return model

    return make


@pytest.fixture
def randomise():
    return randomise_
