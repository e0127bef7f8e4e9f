"""Inspecting a Vision Transformer (section 4.5, Fig. 6 and 7, Appendix D.7-D.8): the principal components of the
patch embedding E, the mean attention distance of every head, and attention rollout.

    filters = embedding_filters(model, k=28)              # Fig. 7 (left): top principal components of E as images
    weights = model.attention_maps(images)                # every layer's softmax(q k^T / sqrt(D_h)), (B, h, L, L)
    dist = mean_attention_distance(weights, model)        # Fig. 7 (right): (layers, heads), in pixels
    maps = rollout_maps(weights, model)                   # Fig. 6: (B, gh, gw) attention of [class] on the patches

Position-embedding similarity (Fig. 7, centre) is in `vitlib.analysis`.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch


def _grid_of(model_or_grid) -> tuple[tuple[int, int], int, int]:
    """(grid, patch_size, num_prefix_tokens) of a VisionTransformer, or of a (gh, gw, patch_size, prefix) tuple."""
    if isinstance(model_or_grid, torch.nn.Module):
        pe = model_or_grid.patch_embed
        return tuple(pe.grid), pe.patch_size, model_or_grid.num_prefix_tokens
    gh, gw, p, prefix = model_or_grid
    return (gh, gw), p, prefix


def _check_weights(weights: torch.Tensor, grid: tuple[int, int], prefix: int) -> None:
    gh, gw = grid
    if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2] or weights.shape[-1] != prefix + gh * gw:
        raise ValueError(f"expected one layer's attention weights (B, heads, L, L) with L = {prefix} prefix + "
                         f"{gh}x{gw} patches = {prefix + gh * gw}, got shape {tuple(weights.shape)}; get them from "
                         f"model.attention_maps(images).")


# ------------------------------------------------------------------------------------------- Fig. 7 (left)
def embedding_filters(model, k: int = 28) -> tuple[torch.Tensor, torch.Tensor]:
    """Fig. 7 (left): the top-k principal components of the rows of E (one filter of P x P x C per embedding
    dimension), as images (k, C, P, P), and the share of the variance each explains (k,)."""
    pe = model.patch_embed
    if not hasattr(pe, "conv_weight"):
        raise ValueError("a hybrid model has no pixel-space patch embedding: its E acts on CNN features (section 3.1).")
    filters = pe.conv_weight().detach().float().cpu()            # (D, C, P, P)
    d = filters.shape[0]
    flat = filters.reshape(d, -1)
    centred = flat - flat.mean(dim=0, keepdim=True)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)    # rows of vh: principal directions in pixel space
    k = min(k, vh.shape[0])
    share = s ** 2 / (s ** 2).sum()
    return vh[:k].reshape(k, *filters.shape[1:]), share[:k]


def plot_embedding_filters(model, k: int = 28, cols: int = 7, size: float = 0.9):
    """The first k principal components of E, each shown with its own colour scale (as in Fig. 7, left)."""
    comps, share = embedding_filters(model, k)
    rows = -(-len(comps) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(cols * size, rows * size), squeeze=False, layout="constrained")
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < len(comps):
            c = comps[i]
            c = (c - c.min()) / (c.max() - c.min()).clamp_min(1e-12)
            ax.imshow((c[0] if c.shape[0] == 1 else c.permute(1, 2, 0)).numpy(), cmap="gray" if c.shape[0] == 1 else None)
            ax.set_title(f"{100 * share[i]:.0f}%", fontsize=6)
    fig.suptitle("Principal components of the patch embedding E", fontsize=9)
    return fig


# ------------------------------------------------------------------------------------------ Fig. 7 (right)
def patch_distances(grid: tuple[int, int], patch_size: int) -> torch.Tensor:
    """Euclidean distance in pixels between the centres of every pair of patches, (N, N)."""
    gh, gw = grid
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    centres = torch.stack([rows.flatten(), cols.flatten()], dim=1).double() * patch_size
    return torch.cdist(centres, centres)


def mean_attention_distance(weights: Sequence[torch.Tensor] | torch.Tensor, model_or_grid) -> torch.Tensor:
    """Fig. 7 (right) / Appendix D.7: for every layer and head, the image-space distance between a query patch and
    the patches it attends to, weighted by the attention, averaged over query patches and images, in pixels.
    Prefix tokens ([class]) are left out as queries and keys; each query's weights on the patches are renormalised
    to sum to 1. `weights`: a list of (B, heads, L, L) per layer (model.attention_maps) or one such tensor.
    Returns (layers, heads)."""
    grid, p, prefix = _grid_of(model_or_grid)
    layers = [weights] if isinstance(weights, torch.Tensor) else list(weights)
    dist = patch_distances(grid, p)
    out = []
    for w in layers:
        _check_weights(w, grid, prefix)
        a = w[..., prefix:, prefix:].double()
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(1e-12)
        out.append((a * dist.to(a.device)).sum(-1).mean(dim=(0, 2)))   # (heads,)
    return torch.stack(out).float().cpu()


def plot_attention_distance(distances: torch.Tensor, ax=None, label: str | None = None, image_size: int | None = None,
                            **kwargs):
    """Fig. 7 (right): one dot per head, mean attention distance (pixels) against the layer (network depth)."""
    distances = torch.as_tensor(distances)
    ax = ax if ax is not None else plt.figure(figsize=(4, 3.2), layout="constrained").add_subplot()
    layers, heads = distances.shape
    x = np.repeat(np.arange(1, layers + 1), heads)
    ax.scatter(x, distances.flatten().numpy(), s=12, label=label, **kwargs)
    ax.set_xlabel("Network depth (layer)")
    ax.set_ylabel("Mean attention distance (pixels)")
    if image_size:
        ax.set_ylim(0, image_size)
    return ax


# ------------------------------------------------------------------------------- Fig. 6 / Appendix D.8
def attention_rollout(weights: Sequence[torch.Tensor], add_residual: bool = True, head_fusion: str = "mean") -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020; Appendix D.8): fuse the heads of every layer (mean, as in the paper,
    or max / min), add the identity for the residual connection and renormalise the rows (A' = (A + I) / 2), then
    multiply the layers: R = A'_L ... A'_1. Returns (B, L, L): how much each output token draws on each input token."""
    fuse = {"mean": lambda w: w.mean(1), "max": lambda w: w.amax(1), "min": lambda w: w.amin(1)}
    if head_fusion not in fuse:
        raise ValueError(f"head_fusion must be one of {', '.join(fuse)}, got {head_fusion!r}.")
    layers = list(weights)
    if not layers:
        raise ValueError("no attention weights given: pass model.attention_maps(images), one tensor per layer.")
    rollout = None
    for w in layers:
        if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
            raise ValueError(f"expected attention weights (B, heads, L, L), got shape {tuple(w.shape)}.")
        a = fuse[head_fusion](w.double())
        if add_residual:
            a = a + torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
        a = a / a.sum(dim=-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout
    return rollout.float()


def rollout_maps(weights: Sequence[torch.Tensor], model_or_grid, add_residual: bool = True,
                 head_fusion: str = "mean") -> torch.Tensor:
    """The rolled-out attention of the [class] token (or, without one, the mean over patch tokens) on the patches,
    (B, gh, gw), each map scaled to sum to 1: what Fig. 6 overlays on the input images."""
    grid, _, prefix = _grid_of(model_or_grid)
    layers = list(weights)
    _check_weights(layers[0], grid, prefix)
    r = attention_rollout(layers, add_residual, head_fusion)
    rows = r[:, 0, prefix:] if prefix else r.mean(dim=1)
    rows = rows / rows.sum(dim=-1, keepdim=True)
    return rows.reshape(-1, *grid)
