"""Inspecting a Vision Transformer (section 4.5, Fig. 6 and 7, Appendix D.7-D.8): the principal components of the
patch embedding E, the mean attention distance of every head, and attention rollout.

    filters = embedding_filters(model, k=28)              # Fig. 7 (left): top principal components of E as images
    weights = model.attention_maps(images)                # every layer's softmax(q k^T / sqrt(D_h)), (B, h, L, L)
    dist = mean_attention_distance(weights, model)        # Fig. 7 (right): (layers, heads), in pixels
    maps = rollout_maps(weights, model)                   # Fig. 6: (B, gh, gw) attention of [class] on the patches
    depth_trend(dist)                                     # Fig. 7 (right) as one number
    model, mean, std = load_reference_vit("ViT-B_16.npz")  # pre-trained weights (.npz, torchvision/timm .pth)

Position-embedding similarity (Fig. 7, centre) is in `vitlib.analysis`.
"""
from __future__ import annotations

import math
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


# --------------------------------------------------------------------------------- one number per claim
def depth_trend(distances: torch.Tensor) -> float:
    """Pearson correlation between the layer (1..L) and the mean attention distance over every (layer, head) dot of
    Fig. 7 (right): > 0 when attention distance grows with depth (Appendix D.7). NaN when all distances are equal."""
    distances = torch.as_tensor(distances).double()
    if distances.ndim != 2 or distances.shape[0] < 2:
        raise ValueError(f"expected mean attention distances (layers >= 2, heads), got shape {tuple(distances.shape)}.")
    layers = torch.arange(1, distances.shape[0] + 1, dtype=torch.float64)[:, None].expand_as(distances)
    return torch.corrcoef(torch.stack([layers.flatten(), distances.flatten()]))[0, 1].item()


# ------------------------------------------------------------------ reference weights and a folder of images
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff")


def load_reference_vit(path) -> tuple[torch.nn.Module, tuple[float, ...], tuple[float, ...]]:
    """A pre-trained ViT from a local file, as a vitlib model, with the (mean, std) its inputs were normalised by:
    an original JAX / timm `.npz` (google-research/vision_transformer; inputs scaled to [-1, 1]), a torchvision state
    dict `.pth` (e.g. vit_b_16's IMAGENET1K_V1 file; ImageNet mean and std) or a timm state dict `.pth` ([-1, 1])."""
    from pathlib import Path

    from . import convert

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no weight file at {path}: pass the path of a ViT .npz (e.g. ViT-B_16.npz) or a "
                                f"torchvision / timm state dict .pth, downloaded beforehand.")
    half = (0.5, 0.5, 0.5)
    if path.suffix == ".npz":
        return convert.from_jax_npz(path).eval(), half, half
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle errors, a truncated file, ...
        raise ValueError(f"{path} could not be read as a PyTorch state dict ({err}); an original ViT checkpoint "
                         f"must end in .npz.") from err
    for key in ("model", "state_dict"):  # training checkpoints often wrap the weights
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
    if not isinstance(sd, dict):
        raise ValueError(f"{path} holds a {type(sd).__name__}, not a state dict: save model.state_dict().")
    if "conv_proj.weight" in sd:
        return convert.from_torchvision(sd).eval(), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    if "patch_embed.proj.weight" in sd and "cls_token" in sd:
        from timm.models.vision_transformer import VisionTransformer as TimmViT
        conv, pos = sd["patch_embed.proj.weight"], sd["pos_embed"]
        dim, patch = conv.shape[0], conv.shape[-1]
        side = math.isqrt(pos.shape[1] - 1)
        depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
        timm_model = TimmViT(img_size=side * patch, patch_size=patch, in_chans=conv.shape[1], embed_dim=dim,
                             depth=depth, num_heads=convert._heads_for(dim, None, "load_reference_vit"),
                             mlp_ratio=sd["blocks.0.mlp.fc1.weight"].shape[0] / dim,
                             num_classes=sd["head.weight"].shape[0] if "head.weight" in sd else 0)
        timm_model.load_state_dict(sd)
        return convert.from_timm(timm_model).eval(), half, half
    raise ValueError(f"{path} is neither a torchvision ViT state dict (conv_proj.weight) nor a timm one "
                     f"(patch_embed.proj.weight); its first keys are {sorted(sd)[:4]}.")


def load_image_folder(folder, image_size: int, mean, std, limit: int = 16) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Up to `limit` images of a folder (searched recursively, sorted by path), RGB, the shorter side resized to
    `image_size` and centre-cropped to a square. Returns (images in [0, 1] for display, the same normalised with
    (mean, std) for the model, the file names), images (B, 3, S, S)."""
    from pathlib import Path

    import torchvision.transforms.v2.functional as TF
    from PIL import Image

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}: image_folder must name a folder of image files "
                                f"({', '.join(IMAGE_SUFFIXES)}).")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)[:limit]
    if not files:
        raise ValueError(f"{folder} holds no image files ({', '.join(IMAGE_SUFFIXES)}).")
    shown = []
    for f in files:
        with Image.open(f) as im:
            x = TF.pil_to_tensor(im.convert("RGB")).float() / 255
        x = TF.resize(x, [image_size], antialias=True)
        shown.append(TF.center_crop(x, [image_size, image_size]))
    shown = torch.stack(shown)
    m, s = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
    return shown, (shown - m) / s, [f.name for f in files]
