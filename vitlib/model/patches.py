"""An image as a sequence of flattened patches and back (section 3.1: x in R^{H x W x C} -> x_p in R^{N x (P^2 C)}),
and per-patch embeddings resampled to another patch grid (section 3.2)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange

from ..utils import pair, square_grid


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


def resample_pos_embed(pos_embed, new_grid, old_grid=None, num_prefix_tokens: int = 1, mode: str = "bicubic"):
    """2D-interpolate (1, prefix + gh*gw, D) position embeddings to another patch grid (section 3.2); the prefix
    ([class]) rows are kept apart. `mode` 'bicubic' is timm's; the original release zooms linearly ('bilinear')."""
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    n, dim = grid.shape[1], grid.shape[2]
    old_grid = square_grid(n, "patch position embeddings") if old_grid is None else tuple(old_grid)
    if old_grid[0] * old_grid[1] != n:
        raise ValueError(f"old_grid {old_grid} has {old_grid[0] * old_grid[1]} cells for {n} patch embeddings.")
    if tuple(old_grid) == tuple(new_grid):
        return pos_embed
    grid = grid.reshape(1, *old_grid, dim).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=tuple(new_grid), mode=mode, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], dim).to(pos_embed.dtype)
    return torch.cat([prefix, grid], dim=1)
