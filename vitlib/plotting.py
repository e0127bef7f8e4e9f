"""Figures for the notebooks: an image with its patch grid, and its patches as a sequence (Fig. 1 of the paper).

Each function draws on one matplotlib Axes and returns it, so a notebook can check what a figure shows: the grid
lines carry the gid `PATCH_GRID_GID` (H/P - 1 + W/P - 1 of them) and `show_patch_sequence` draws one image per patch
(`len(ax.images) == N`).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from .patches import check_patch_size

PATCH_GRID_GID = "patch-grid"


def to_display(image) -> np.ndarray:
    """A tensor (C, H, W) or (H, W), or an array (H, W) or (H, W, C), as a float array (H, W) or (H, W, C) for imshow.

    Floats are taken to lie in [0, 1] (and clipped there), integers in [0, 255]."""
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu()
        if image.ndim == 3:
            image = image.permute(1, 2, 0)  # (C, H, W) -> (H, W, C)
        image = image.numpy()
    arr = np.asarray(image)
    arr = arr / 255.0 if np.issubdtype(arr.dtype, np.integer) else arr.astype(np.float64)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3):
        raise ValueError(f"expected one image (C, H, W), (H, W) or (H, W, C), got shape {arr.shape}.")
    return np.clip(arr, 0.0, 1.0)


def _imshow(ax, arr: np.ndarray, **kwargs):
    if arr.ndim == 2:
        return ax.imshow(arr, cmap="gray", vmin=0.0, vmax=1.0, **kwargs)
    return ax.imshow(arr, **kwargs)


def show_patch_grid(image, patch_size: int, ax=None, numbers: bool | None = None, color: str = "tab:red",
                    linewidth: float = 1.0, title: str | None = None):
    """Draw an image with lines between its P x P patches; `numbers` writes each patch's position in the sequence
    (row-major, as `vitlib.patchify`) in its corner (default: when there are at most 64 patches)."""
    arr = to_display(image)
    gh, gw = check_patch_size(arr.shape[:2], patch_size)
    ax = ax if ax is not None else plt.figure().add_subplot()
    _imshow(ax, arr)
    for i in range(1, gh):
        ax.axhline(i * patch_size - 0.5, color=color, linewidth=linewidth, gid=PATCH_GRID_GID)
    for j in range(1, gw):
        ax.axvline(j * patch_size - 0.5, color=color, linewidth=linewidth, gid=PATCH_GRID_GID)
    if numbers if numbers is not None else gh * gw <= 64:
        for r in range(gh):
            for c in range(gw):
                ax.text(c * patch_size - 0.3, r * patch_size - 0.3, str(r * gw + c), color="yellow", fontsize=7,
                        ha="left", va="top", bbox=dict(facecolor="black", alpha=0.6, pad=0.8, linewidth=0))
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def grid_lines(ax) -> int:
    """How many patch-grid lines `show_patch_grid` drew on this Axes."""
    return sum(line.get_gid() == PATCH_GRID_GID for line in ax.lines)


def show_patch_sequence(patches: torch.Tensor, patch_size: int, per_row: int | None = None, ax=None,
                        gap: float = 0.25, numbers: bool | None = None, title: str | None = None):
    """Draw one image's flattened patches (N, P*P*C) as the sequence the Transformer reads: patch 0, 1, ..., N-1,
    `per_row` to a row (default: all in one row). Each patch is unflattened in vitlib's (p1 p2 c) order and drawn as
    its own image. `numbers` labels every patch (default: when N <= 64), otherwise the first patch of each row."""
    patches = patches.detach().cpu()
    if patches.ndim != 2 or patches.shape[1] % (patch_size * patch_size):
        raise ValueError(f"expected one image's patches (N, P*P*C) with P={patch_size}, got shape {tuple(patches.shape)}.")
    n = patches.shape[0]
    channels = patches.shape[1] // (patch_size * patch_size)
    per_row = n if per_row is None else max(1, min(per_row, n))
    rows = -(-n // per_row)
    label_all = numbers if numbers is not None else n <= 64
    ax = ax if ax is not None else plt.figure(figsize=(min(14, 0.3 * per_row + 1), 0.45 * rows + 0.5)).add_subplot()
    step_y = 1 + gap + (0.6 if label_all else 0.0)
    for i in range(n):
        r, c = divmod(i, per_row)
        left, top = c * (1 + gap), r * step_y
        patch = to_display(patches[i].reshape(patch_size, patch_size, channels).numpy())
        _imshow(ax, patch, extent=(left, left + 1, top + 1, top), interpolation="nearest")
        if label_all:
            ax.text(left + 0.5, top + 1.05, str(i), ha="center", va="top", fontsize=6)
        elif c == 0:
            ax.text(left - 0.3, top + 0.5, str(i), ha="right", va="center", fontsize=7)
    ax.set_xlim(-gap - (1.5 if not label_all else 0), per_row * (1 + gap))
    ax.set_ylim(rows * step_y, -gap)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax
