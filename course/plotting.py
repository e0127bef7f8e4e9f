"""Figures for the notebooks: patch grids and sequences (Fig. 1 of the paper), training curves, confusion matrices.

Each function draws on one matplotlib Axes and returns it, so a notebook can check what a figure shows: the grid
lines carry the gid `PATCH_GRID_GID` (H/P - 1 + W/P - 1 of them) and `show_patch_sequence` draws one image per patch
(`len(ax.images) == N`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from vitlib.analysis.attention import class_attention
from vitlib.model import check_patch_size

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


def show_patch_grid(
    image,
    patch_size: int,
    ax=None,
    numbers: bool | None = None,
    color: str = "tab:red",
    linewidth: float = 1.0,
    title: str | None = None,
):
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
                ax.text(
                    c * patch_size - 0.3,
                    r * patch_size - 0.3,
                    str(r * gw + c),
                    color="yellow",
                    fontsize=7,
                    ha="left",
                    va="top",
                    bbox=dict(facecolor="black", alpha=0.6, pad=0.8, linewidth=0),
                )
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title)
    return ax


def grid_lines(ax) -> int:
    """How many patch-grid lines `show_patch_grid` drew on this Axes."""
    return sum(line.get_gid() == PATCH_GRID_GID for line in ax.lines)


def show_patch_sequence(
    patches: torch.Tensor,
    patch_size: int,
    per_row: int | None = None,
    ax=None,
    gap: float = 0.25,
    numbers: bool | None = None,
    title: str | None = None,
):
    """Draw one image's flattened patches (N, P*P*C) as the sequence the Transformer reads: patch 0, 1, ..., N-1,
    `per_row` to a row (default: all in one row). Each patch is unflattened in vitlib's (p1 p2 c) order and drawn as
    its own image. `numbers` labels every patch (default: when N <= 64), otherwise the first patch of each row."""
    patches = patches.detach().cpu()
    if patches.ndim != 2 or patches.shape[1] % (patch_size * patch_size):
        raise ValueError(
            f"expected one image's patches (N, P*P*C) with P={patch_size}, got shape {tuple(patches.shape)}."
        )
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


# ------------------------------------------------------------------------------------------------ training curves
def _rows(history) -> list[dict]:
    """Epoch rows from a train() Result, a list of dicts, or a metrics.csv path."""
    if hasattr(history, "history"):
        return list(history.history)
    if isinstance(history, (str, bytes)) or hasattr(history, "__fspath__"):
        import csv

        with open(history, newline="") as f:
            return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(f)]
    return list(history)


def plot_history(history, axes=None, label: str | None = None, x: str = "epoch"):
    """Loss and accuracy per epoch of one run (train, and val or test when measured), on two Axes; returns them.

    `history` is the Result of `vitlib.train.train`, its `history` list, or the path of a run's metrics.csv. Call it
    again with the same `axes` and another `label` to compare runs. Each curve is one Line2D labelled
    '<label> <split>' (e.g. 'pre-LN train'), so a notebook can check what is drawn."""
    rows = _rows(history)
    if not rows:
        raise ValueError("the history is empty: train for at least one epoch first.")
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    prefix = f"{label} " if label else ""
    xs = [r[x] for r in rows]
    for ax, metric in zip(axes, ("loss", "acc")):
        color = None  # with a label, one colour per run (splits differ by line style); without, one per split
        for split, style in (("train", "-"), ("val", "--"), ("test", ":")):
            key = f"{split}_{metric}"
            if all(key in r for r in rows):
                (line,) = ax.plot(
                    xs, [r[key] for r in rows], style, marker="o", markersize=3, label=prefix + split, color=color
                )
                color = line.get_color() if label else None
        ax.set_xlabel({"time_s": "wall-clock seconds", "step": "optimizer step"}.get(x, x))
        ax.set_ylabel({"loss": "cross-entropy loss", "acc": "accuracy"}[metric])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return axes


def confusion_matrix(predictions: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """counts[i, j] = how many images of true class i were predicted as class j."""
    index = labels.long() * num_classes + predictions.long()
    return torch.bincount(index, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def plot_confusion_matrix(counts: torch.Tensor, class_names: list[str], ax=None, normalize: bool = True):
    """A confusion matrix as an image, rows = true class, columns = prediction (row-normalised by default)."""
    counts = torch.as_tensor(counts).double()
    if counts.shape != (len(class_names), len(class_names)):
        raise ValueError(f"a {len(class_names)}-class matrix was expected, got shape {tuple(counts.shape)}.")
    shown = counts / counts.sum(1, keepdim=True).clamp_min(1) if normalize else counts
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5.4), layout="constrained")
    im = ax.imshow(shown.numpy(), cmap="Blues", vmin=0)
    ticks = range(len(class_names))
    ax.set_xticks(ticks, class_names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(ticks, class_names, fontsize=8)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    for i in ticks:
        for j in ticks:
            value = shown[i, j].item()
            if value > 0:
                text = f"{value:.2f}" if normalize else f"{int(value)}"
                ax.text(
                    j,
                    i,
                    text,
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if value > 0.6 * shown.max().item() else "black",
                )
    ax.figure.colorbar(im, ax=ax, shrink=0.8)
    return ax


def show_images(images: torch.Tensor, titles: list[str] | None = None, cols: int = 8, size: float = 1.6):
    """A grid of images (B, C, H, W) in [0, 1] with optional titles; returns the figure (one AxesImage per image)."""
    n = len(images)
    if n == 0:
        raise ValueError("no images to show.")
    cols = min(cols, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(size * cols, (size + 0.35) * rows), squeeze=False, layout="constrained"
    )
    for k, ax in enumerate(axes.flat):
        ax.axis("off")
        if k < n:
            _imshow(ax, to_display(images[k]))
            if titles is not None:
                ax.set_title(titles[k], fontsize=7)
    return fig


# ------------------------------------------------------------------------------------------------ attention maps
def show_attention_matrix(
    weights,
    labels: list[str] | None = None,
    ax=None,
    title: str | None = None,
    colorbar: bool = True,
    vmax: float | None = 1.0,
):
    """Draw one attention matrix A (L, L): row i = query token i, column j = key token j, A[i, j] = how much token i
    takes from token j (each row sums to 1). `labels` names the tokens on both axes. The AxesImage holds A itself."""
    arr = weights.detach().cpu().double().numpy() if isinstance(weights, torch.Tensor) else np.asarray(weights, float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(
            f"expected one square attention matrix (L, L), got shape {arr.shape}; pick a batch "
            f"element and a head first, e.g. weights[0, 0]."
        )
    if labels is not None and len(labels) != arr.shape[0]:
        raise ValueError(f"{len(labels)} labels for {arr.shape[0]} tokens.")
    ax = ax if ax is not None else plt.figure(figsize=(4.4, 3.8), layout="constrained").add_subplot()
    im = ax.imshow(arr, cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
    if labels is not None:
        ticks = range(len(labels))
        ax.set_xticks(ticks, labels, fontsize=8)
        ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_xlabel("key j (attended to)")
    ax.set_ylabel("query i")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, shrink=0.8)
    if title:
        ax.set_title(title)
    return ax


def cls_attention_grid(weights: torch.Tensor, grid: tuple[int, int], num_prefix_tokens: int = 1) -> torch.Tensor:
    """The [class] token's attention on the patches, on the patch grid: weights (..., L, L) with L = prefix + N
    -> (..., grid_h, grid_w), row 0 without the prefix columns (these values sum to 1 minus the attention to the
    prefix tokens): `vitlib.analysis.attention.class_attention` on the grid."""
    return class_attention(weights, num_prefix_tokens, grid)


def show_attention_overlay(
    image,
    attention: torch.Tensor,
    ax=None,
    alpha: float = 0.55,
    cmap: str = "inferno",
    title: str | None = None,
    vmax: float | None = None,
    colorbar: bool = False,
    label: str = "attention weight",
):
    """An image with an attention map over it: `attention` (grid_h, grid_w), e.g. from `cls_attention_grid`, is
    stretched over the whole image (one cell per patch, no smoothing), coloured from 0 to `vmax` (default: the map's
    own maximum; give several maps one `vmax` to compare them). `colorbar` adds a colour bar named `label`. Two
    AxesImages: the image, then the map (its array is the map as given)."""
    arr = to_display(image)
    att = (
        attention.detach().cpu().double().numpy()
        if isinstance(attention, torch.Tensor)
        else np.asarray(attention, float)
    )
    if att.ndim != 2:
        raise ValueError(f"expected one attention map (grid_h, grid_w), got shape {att.shape}.")
    ax = ax if ax is not None else plt.figure(figsize=(2.6, 2.6), layout="constrained").add_subplot()
    h, w = arr.shape[:2]
    _imshow(ax, arr)
    overlay = ax.imshow(
        att,
        cmap=cmap,
        alpha=alpha,
        extent=(-0.5, w - 0.5, h - 0.5, -0.5),
        interpolation="nearest",
        vmin=0.0,
        vmax=vmax if vmax is not None else max(float(att.max()), 1e-12),
    )
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=9)
    if colorbar:
        ax.figure.colorbar(overlay, ax=ax, shrink=0.8, label=label)
    return ax


def overlay_colorbar(axes, label: str = "attention weight"):
    """One colour bar for several `show_attention_overlay` Axes drawn with the same `vmax`; refuses overlays on
    different scales, where one bar would misread all but one of them."""
    axes = list(np.ravel(axes))
    limits = {tuple(ax.images[-1].get_clim()) for ax in axes}
    if len(limits) != 1:
        raise ValueError(f"the overlays use {len(limits)} colour scales: draw them with one vmax= first.")
    return axes[0].figure.colorbar(axes[0].images[-1], ax=axes, shrink=0.8, label=label)
