"""The figures of what a ViT learned, for the notebooks: Fig. 7 (right) the mean attention distance per head and
layer, Fig. 7 (center) the similarity of E_pos as a mosaic of tiles, Fig. 7 (left) the principal components of E;
and Fig. 7 (right)'s claims in one number each (`depth_trend`, `local_head_ratio`). The numbers they draw are
vitlib's (`vitlib.analysis.attention`, `vitlib.analysis.embeddings`)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from vitlib.analysis.attention import uniform_attention_distance
from vitlib.analysis.embeddings import embedding_filters, position_similarity


def plot_attention_distance(
    distances: torch.Tensor,
    ax=None,
    label: str | None = None,
    image_size: int | None = None,
    max_distance: float | None = None,
    **kwargs,
):
    """Fig. 7 (right): one dot per head, mean attention distance (pixels) against the layer (network depth).

    The y axis runs from 0 to `max_distance` (the largest distance a head can attend over, e.g.
    `patch_distances(grid, P).max()`), else to the image's diagonal (`image_size` x sqrt 2), else to the largest
    distance drawn: never a zoom onto the dots alone, which would make a difference of a pixel look like structure."""
    distances = torch.as_tensor(distances)
    ax = ax if ax is not None else plt.figure(figsize=(4, 3.2), layout="constrained").add_subplot()
    layers, heads = distances.shape
    x = np.repeat(np.arange(1, layers + 1), heads)
    ax.scatter(x, distances.flatten().numpy(), s=12, label=label, **kwargs)
    top = max_distance if max_distance else image_size * math.sqrt(2) if image_size else None
    earlier = 0.0 if ax.get_autoscaley_on() else ax.get_ylim()[1]  # a second call on the same axes keeps the span
    top = max(top or 0.0, float(distances.max()), earlier)
    ax.set_ylim(0, top)
    ax.set_xticks(range(1, layers + 1))
    ax.set_xlabel("Network depth (layer)")
    ax.set_ylabel(f"Mean attention distance (pixels, 0 to {top:.0f})")
    return ax


def similarity_mosaic(similarity: torch.Tensor, pad: int = 1) -> np.ndarray:
    """The (N, gh, gw) similarities laid out as in Fig. 7 (center): tile i, a gh x gw image, sits at the grid position
    of patch i; tiles are separated by `pad` rows/columns of NaN (drawn blank). Returns a float array."""
    similarity = torch.as_tensor(similarity).detach().cpu().double()
    n, gh, gw = similarity.shape
    if n != gh * gw:
        raise ValueError(f"expected one gh x gw tile per patch, got {n} tiles of {gh}x{gw}.")
    out = np.full((gh * gh + (gh - 1) * pad, gw * gw + (gw - 1) * pad), np.nan)
    for i in range(n):
        r, c = divmod(i, gw)
        top, left = r * (gh + pad), c * (gw + pad)
        out[top : top + gh, left : left + gw] = similarity[i].numpy()
    return out


def plot_position_similarity(
    source,
    grid: tuple[int, int] | None = None,
    ax=None,
    title: str | None = None,
    pad: int = 1,
    colorbar: bool = True,
    cmap: str = "viridis",
    vmin: float | None = -1.0,
    vmax: float | None = 1.0,
):
    """Fig. 7 (center): for the patch in row r, column c, a tile showing the cosine similarity of its position
    embedding with those of all patches. One image on the Axes (`ax.images[0]`, the `similarity_mosaic`); returns ax.
    The colour scale is the paper's, -1 to 1; vmin=None / vmax=None fit it to the data instead."""
    sim = position_similarity(source, grid)
    gh, gw = sim.shape[1:]
    mosaic = similarity_mosaic(sim, pad)
    ax = ax if ax is not None else plt.figure(figsize=(4.2, 3.6), layout="constrained").add_subplot()
    colormap = plt.get_cmap(cmap).with_extremes(bad="white")  # the NaN gaps between tiles
    im = ax.imshow(mosaic, cmap=colormap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xticks([c * (gw + pad) + (gw - 1) / 2 for c in range(gw)], [str(c + 1) for c in range(gw)])
    ax.set_yticks([r * (gh + pad) + (gh - 1) / 2 for r in range(gh)], [str(r + 1) for r in range(gh)])
    ax.tick_params(length=0, labelsize=8)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("Input patch column")
    ax.set_ylabel("Input patch row")
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, shrink=0.8, label="Cosine similarity")
    return ax


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
            ax.imshow(
                (c[0] if c.shape[0] == 1 else c.permute(1, 2, 0)).numpy(), cmap="gray" if c.shape[0] == 1 else None
            )
            ax.set_title(f"{100 * share[i]:.0f}%", fontsize=6)
    fig.suptitle("Principal components of the patch embedding E", fontsize=9)
    return fig


def depth_trend(distances: torch.Tensor) -> float:
    """Pearson correlation between the layer (1..L) and the mean attention distance over every (layer, head) dot of
    Fig. 7 (right): > 0 when attention distance grows with depth (Appendix D.7). NaN when all distances are equal."""
    distances = torch.as_tensor(distances).double()
    if distances.ndim != 2 or distances.shape[0] < 2:
        raise ValueError(f"expected mean attention distances (layers >= 2, heads), got shape {tuple(distances.shape)}.")
    layers = torch.arange(1, distances.shape[0] + 1, dtype=torch.float64)[:, None].expand_as(distances)
    return torch.corrcoef(torch.stack([layers.flatten(), distances.flatten()]))[0, 1].item()


def local_head_ratio(distances: torch.Tensor, model_or_grid, layer: int = 0) -> float:
    """App. D.7 in one number: the mean attention distance of the most local head of `layer` (0: the first) divided
    by `uniform_attention_distance`: near 0 a head that attends to its own token, 1 one that attends everywhere
    alike (Fig. 7 right: far below 1 in ViT-L/16's layer 1)."""
    return torch.as_tensor(distances)[layer].min().item() / uniform_attention_distance(model_or_grid)
