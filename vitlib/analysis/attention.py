"""Where a ViT's attention looks (section 4.5, Fig. 6 and Fig. 7 right, Appendix D.7-D.8): the mean attention
distance of every head, and attention rollout.

    weights = model.attention_maps(images)                # every layer's softmax(q k^T / sqrt(D_h)), (B, h, L, L)
    dist = mean_attention_distance(weights, model)        # Fig. 7 (right): (layers, heads), in pixels
    maps = rollout_maps(weights, model)                   # Fig. 6: (B, gh, gw) attention of [class] on the patches
    rows = class_attention(weights[-1], grid=(gh, gw))    # [class]'s row of the last layer: (B, h, gh, gw)

What E and E_pos learned (Fig. 7 left and centre) is in `vitlib.analysis.embeddings`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .embeddings import patch_distances


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
        raise ValueError(
            f"expected one layer's attention weights (B, heads, L, L) with L = {prefix} prefix + "
            f"{gh}x{gw} patches = {prefix + gh * gw}, got shape {tuple(weights.shape)}; get them from "
            f"model.attention_maps(images)."
        )


def class_attention(
    weights: torch.Tensor, num_prefix_tokens: int = 1, grid: tuple[int, int] | None = None, renormalise: bool = False
) -> torch.Tensor:
    """The [class] token's attention on the patches: row 0 of attention weights (..., L, L) without the prefix
    columns, (..., N); without prefix tokens the mean of all rows. `renormalise`: each row scaled to sum to 1 over
    the patches. `grid` (gh, gw): checked against L, the result put on the patch grid, (..., gh, gw)."""
    if grid is not None:
        gh, gw = grid
        if weights.shape[-1] != num_prefix_tokens + gh * gw or weights.shape[-2] != weights.shape[-1]:
            raise ValueError(
                f"attention weights of shape {tuple(weights.shape)} do not fit {num_prefix_tokens} prefix "
                f"token(s) + a {gh}x{gw} grid of patches (L = {num_prefix_tokens + gh * gw})."
            )
    rows = weights[..., 0, num_prefix_tokens:] if num_prefix_tokens else weights.mean(dim=-2)
    if renormalise:
        rows = rows / rows.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    return rows if grid is None else rows.reshape(*rows.shape[:-1], *grid)


# ------------------------------------------------------------------------------------------ Fig. 7 (right)
def mean_attention_distance(weights: Sequence[torch.Tensor] | torch.Tensor, model_or_grid) -> torch.Tensor:
    """Fig. 7 (right) / Appendix D.7: for every layer and head, the image-space distance (pixels) between a query
    patch and the patches it attends to, weighted by the attention, averaged over queries and images; prefix tokens
    left out, each query's weights on the patches renormalised. `weights`: (B, heads, L, L) per layer, or one such
    tensor. Returns (layers, heads)."""
    grid, p, prefix = _grid_of(model_or_grid)
    layers = [weights] if isinstance(weights, torch.Tensor) else list(weights)
    dist = patch_distances(grid, p)
    out = []
    for w in layers:
        _check_weights(w, grid, prefix)
        a = w[..., prefix:, prefix:].double()
        a = a / a.sum(dim=-1, keepdim=True).clamp_min(1e-12)
        out.append((a * dist.to(a.device)).sum(-1).mean(dim=(0, 2)))  # (heads,)
    return torch.stack(out).float().cpu()


def uniform_attention_distance(model_or_grid) -> float:
    """The mean attention distance (pixels) of a head that attends to every token equally (a hybrid's tokens lie its
    CNN's stride apart): the yardstick that puts models with different grids on one scale."""
    grid, p, _ = _grid_of(model_or_grid)
    return patch_distances(grid, p).mean().item()


# ------------------------------------------------------------------------------- Fig. 6 / Appendix D.8
def attention_rollout(
    weights: Sequence[torch.Tensor], add_residual: bool = True, head_fusion: str = "mean"
) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020; Appendix D.8): fuse each layer's heads (mean, as in the paper, or
    max / min), add the identity for the residual and renormalise the rows (A' = (A + I) / 2), then multiply the
    layers: R = A'_L ... A'_1, (B, L, L)."""
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


def rollout_maps(
    weights: Sequence[torch.Tensor], model_or_grid, add_residual: bool = True, head_fusion: str = "mean"
) -> torch.Tensor:
    """The rolled-out attention of the [class] token (or, without one, the mean over patch tokens) on the patches,
    (B, gh, gw), each map scaled to sum to 1: what Fig. 6 overlays on the input images."""
    grid, _, prefix = _grid_of(model_or_grid)
    layers = list(weights)
    _check_weights(layers[0], grid, prefix)
    return class_attention(attention_rollout(layers, add_residual, head_fusion), prefix, grid, renormalise=True)
