"""What a ViT's embeddings learned (section 4.5): the principal components of the patch embedding E (Fig. 7, left)
and the similarity of the position embeddings E_pos (Fig. 7, center, and Fig. 10 of the paper).

    filters, share = embedding_filters(model, k=28)   # Fig. 7 (left): top principal components of E as images
    sim = position_similarity(model)                  # (N, gh, gw): patch i's E_pos against every patch

`model` may be a `VisionTransformer` or a tensor of embeddings ((N, D), (prefix + N, D) or (1, prefix + N, D)); the
[class] token's embedding (the prefix) is left out, as in the paper's figure.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..utils import square_grid


def patch_position_embeddings(source, grid: tuple[int, int] | None = None) -> tuple[torch.Tensor, tuple[int, int]]:
    """The position embeddings of the patches only, (N, D), and their grid (gh, gw): prefix rows dropped. `source`:
    a VisionTransformer or a tensor; without `grid` a tensor's grid is square, of N or 1 + N rows ([class] first)."""
    if isinstance(source, torch.nn.Module):
        emb = source.position_embedding()
        if emb is None:
            raise ValueError(
                f"position embeddings of kind {source.config.pos_embed!r} add nothing to the tokens, so there is no "
                f"embedding to compare: use a model with 'learned', 'learned2d' or 'sincos2d'."
            )
        grid = tuple(source.patch_embed.grid) if grid is None else tuple(grid)
        emb = emb[0, source.num_prefix_tokens :]
    else:
        emb = torch.as_tensor(source)
        if emb.ndim == 3:
            if emb.shape[0] != 1:
                raise ValueError(f"expected one set of position embeddings (1, L, D), got shape {tuple(emb.shape)}.")
            emb = emb[0]
        if emb.ndim != 2:
            raise ValueError(f"expected position embeddings (L, D) or (1, L, D), got shape {tuple(emb.shape)}.")
        rows = emb.shape[0]
        if grid is None:
            try:
                grid = square_grid(rows, "position embeddings")
            except ValueError:  # a [class] embedding first?
                grid = square_grid(rows - 1, "position embeddings (with or without a [class] embedding)")
        grid = tuple(grid)
        prefix = rows - grid[0] * grid[1]
        if prefix < 0:
            raise ValueError(f"grid {grid} has {grid[0] * grid[1]} patches but there are only {rows} embeddings.")
        emb = emb[prefix:]
    return emb.detach().float().cpu(), grid


def position_similarity(source, grid: tuple[int, int] | None = None) -> torch.Tensor:
    """Cosine similarity of every patch's position embedding with all the others, as a (N, gh, gw) tensor: entry
    [i, r, c] compares patch i (row-major: row i // gw, column i % gw) with the patch in row r, column c."""
    emb, (gh, gw) = patch_position_embeddings(source, grid)
    unit = F.normalize(emb, dim=-1)
    return (unit @ unit.T).reshape(gh * gw, gh, gw)


# ------------------------------------------------------------------------- the structure of E_pos, as numbers
def patch_distances(grid: tuple[int, int], patch_size: int) -> torch.Tensor:
    """Euclidean distance in pixels between the centres of every pair of patches, (N, N)."""
    gh, gw = grid
    rows, cols = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    centres = torch.stack([rows.flatten(), cols.flatten()], dim=1).double() * patch_size
    return torch.cdist(centres, centres)


def _pair_geometry(gh: int, gw: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Euclidean and Chebyshev distances (N, N) between the patches of a gh x gw grid, in patch units."""
    r, c = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
    r, c = r.flatten().double(), c.flatten().double()
    chebyshev = torch.maximum((r[:, None] - r[None]).abs(), (c[:, None] - c[None]).abs())
    return patch_distances((gh, gw), 1), chebyshev


def similarity_by_distance(source, grid: tuple[int, int] | None = None) -> list[tuple[float, float, int]]:
    """Fig. 7 (center) as a curve: (distance, mean cosine similarity, pairs) rows for each Euclidean distance between
    two patches (in patches), sorted by distance; distance 0 left out."""
    sim = position_similarity(source, grid)
    n, gh, gw = sim.shape
    flat = sim.reshape(n, n).double()
    dist, _ = _pair_geometry(gh, gw)
    rounded = (dist * 1e6).round() / 1e6  # sqrt(2) from different pairs must fall in one bin
    out = []
    for d in sorted(set(rounded[~torch.eye(n, dtype=torch.bool)].tolist())):
        mask = rounded == d
        out.append((float(d), float(flat[mask].mean()), int(mask.sum()) // 2))
    return out


def position_structure(source, grid: tuple[int, int] | None = None) -> dict:
    """Numbers for Fig. 7 (center), "closer patches tend to have more similar position embeddings" (§4.5): cosine
    similarity of E_pos averaged over side-by-side patches (`neighbour`) and pairs at least half the grid apart along
    rows or columns (`far`); `gap` = neighbour - far; `distance_corr` (Pearson, similarity against distance);
    `nearest_is_neighbour` (the share of patches whose most similar other patch touches it) against `chance_nearest`;
    `self_is_max` (1.0 unless rows repeat); `line_effect` (the least-squares coefficient of "same row or column" beside
    distance). Random embeddings give gap, distance_corr and line_effect ~ 0 and nearest_is_neighbour ~ chance.
    """
    sim = position_similarity(source, grid)
    n, gh, gw = sim.shape
    if n < 2:
        raise ValueError(f"a grid of {gh}x{gw} patches has no pairs to compare: it needs at least 2 patches.")
    flat = sim.reshape(n, n).double()
    dist, cheb = _pair_geometry(gh, gw)
    off = ~torch.eye(n, dtype=torch.bool)
    adjacent = (dist - 1).abs() < 1e-9
    far = cheb >= math.ceil(max(gh, gw) / 2)
    if not adjacent.any() or not far.any():
        raise ValueError(f"a grid of {gh}x{gw} patches is too small to tell near from far patches.")
    x, y = dist[off], flat[off]
    x, y = x - x.mean(), y - y.mean()
    denom = float(x.norm() * y.norm())
    others = flat.masked_fill(~off, float("-inf"))
    nearest = others.argmax(dim=1)
    touching = (cheb <= 1) & off
    rows = torch.arange(n) // gw
    same_line = (rows[:, None] == rows[None]) | ((torch.arange(n) % gw)[:, None] == (torch.arange(n) % gw)[None])
    design = torch.stack([torch.ones_like(dist[off]), dist[off], same_line[off].double()], dim=1)
    line_effect = float(torch.linalg.lstsq(design, flat[off][:, None]).solution[2, 0])
    neighbour = float(flat[adjacent].mean())
    far_mean = float(flat[far].mean())
    return {
        "grid": (gh, gw),
        "neighbour": neighbour,
        "far": far_mean,
        "gap": neighbour - far_mean,
        "distance_corr": float((x * y).sum()) / denom if denom > 0 else 0.0,
        "nearest_is_neighbour": float(touching[torch.arange(n), nearest].double().mean()),
        "chance_nearest": float((touching.sum(dim=1).double() / (n - 1)).mean()),
        "self_is_max": float((flat.diagonal() > others.max(dim=1).values + 1e-6).double().mean()),
        "line_effect": line_effect,
    }


# ------------------------------------------------------------------------------------------- Fig. 7 (left)
def embedding_filters(model, k: int = 28) -> tuple[torch.Tensor, torch.Tensor]:
    """Fig. 7 (left): the top-k principal components of the rows of E (one filter of P x P x C per embedding
    dimension), as images (k, C, P, P), and the share of the variance each explains (k,)."""
    pe = model.patch_embed
    if not hasattr(pe, "linear_weight"):
        raise ValueError("a hybrid model has no pixel-space patch embedding: its E acts on CNN features (section 3.1).")
    filters = pe.proj.weight.detach().float().cpu()  # (D, C, P, P)
    d = filters.shape[0]
    flat = filters.reshape(d, -1)
    centred = flat - flat.mean(dim=0, keepdim=True)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)  # rows of vh: principal directions in pixel space
    k = min(k, vh.shape[0])
    share = s**2 / (s**2).sum()
    return vh[:k].reshape(k, *filters.shape[1:]), share[:k]
