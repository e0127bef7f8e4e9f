"""Cutting an image into a sequence of flattened patches and back (section 3.1: x in R^{H x W x C} ->
x_p in R^{N x (P^2 C)})."""

from __future__ import annotations

import torch
from einops import rearrange

from ..utils import pair


def check_patch_size(image_size: int | tuple[int, int], patch_size: int) -> tuple[int, int]:
    """Return the patch grid (H/P, W/P), or raise a clear error when P does not divide the image."""
    h, w = pair(image_size, "image_size")
    if patch_size < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size}.")
    if h % patch_size or w % patch_size:
        raise ValueError(
            f"patch size {patch_size} does not divide the image size {h}x{w}: "
            f"choose a patch size that divides both sides (e.g. one of "
            f"{[p for p in range(1, min(h, w) + 1) if h % p == 0 and w % p == 0]}) or resize the image."
        )
    return h // patch_size, w // patch_size


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, P*P*C) with N = HW/P^2, patches in row-major order, each flattened as (p1 p2 c)."""
    if images.ndim != 4:
        raise ValueError(f"expected a batch of images (B, C, H, W), got a tensor of shape {tuple(images.shape)}.")
    check_patch_size(tuple(images.shape[-2:]), patch_size)
    return rearrange(images, "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch_size, p2=patch_size)


def unpatchify(patches: torch.Tensor, patch_size: int, grid: tuple[int, int], channels: int) -> torch.Tensor:
    """(B, N, P*P*C) -> (B, C, H, W): the inverse of `patchify`."""
    gh, gw = grid
    if patches.shape[1] != gh * gw or patches.shape[2] != patch_size * patch_size * channels:
        raise ValueError(
            f"expected patches of shape (B, {gh * gw}, {patch_size * patch_size * channels}) for a {gh}x{gw} grid "
            f"of {patch_size}x{patch_size}x{channels} patches, got {tuple(patches.shape)}."
        )
    return rearrange(patches, "b (h w) (p1 p2 c) -> b c (h p1) (w p2)", h=gh, w=gw, p1=patch_size, p2=patch_size)
