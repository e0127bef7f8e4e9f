"""Fig. 1 of the paper drawn with matplotlib (no image file, no network): the image cut into patches, the linear
projection E, the [class] token and E_pos, the Transformer encoder (eq. 2-3; one block on the right), the MLP head."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

COLOURS = {"patch": "#f4d6a0", "embed": "#f7b7a3", "token": "#c9e4f6", "pos": "#b9b0e0", "encoder": "#d9ead3",
           "head": "#fce5cd", "msa": "#a4c2f4", "mlp": "#b6d7a8", "norm": "#eeeeee"}  # fmt: skip


def _box(ax, x, y, w, h, text, colour, size=9):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=colour, ec="0.3"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)


def _arrow(ax, start, end):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color="0.25", lw=1))


def _tokens(ax, image: torch.Tensor | None, patch_size: int, n: int):
    """The row of patches (from `image` when given) and, above the projection, the n + 1 tokens with E_pos."""
    image = None if image is None else torch.as_tensor(image).detach().cpu().numpy()
    for i in range(n):
        x = 1.2 + i * 0.78
        if image is not None:
            side = image.shape[-1] // patch_size
            r, c = divmod(i, side)
            tile = image[0, r * patch_size : (r + 1) * patch_size, c * patch_size : (c + 1) * patch_size]
            ax.imshow(tile, cmap="gray", extent=(x, x + 0.6, 0.3, 0.9), vmin=0, vmax=1, zorder=2)
        else:
            ax.add_patch(Rectangle((x, 0.3), 0.6, 0.6, fc=COLOURS["patch"], ec="0.3"))
        _arrow(ax, (x + 0.3, 0.95), (x + 0.3, 1.45))
    for i in range(n + 1):
        x = 0.42 + i * 0.78
        ax.add_patch(Rectangle((x, 2.25), 0.3, 0.45, fc=COLOURS["pos"], ec="0.3"))
        ax.text(x + 0.15, 2.47, str(i), ha="center", va="center", fontsize=7)
        ax.add_patch(Rectangle((x + 0.3, 2.25), 0.3, 0.45, fc=COLOURS["token"], ec="0.3"))
        ax.text(x + 0.45, 2.47, "*" if i == 0 else "", ha="center", va="center", fontsize=9)
        _arrow(ax, (x + 0.3, 2.75), (x + 0.3, 3.25))


def draw_vit(image: torch.Tensor | None = None, patch_size: int = 7, num_tokens: int = 9, depth_label: str = "L"):
    """Fig. 1: the ViT on the left (patches of `image`, (C, H, W) in [0, 1], when given), an encoder block on the right.

    `num_tokens` patches are drawn (the first ones, row by row): the figure shows the structure, not every patch."""
    fig, ax = plt.subplots(figsize=(11, 5.2), layout="constrained")
    n = num_tokens
    width = 0.42 + (n + 1) * 0.78
    _tokens(ax, image, patch_size, n)
    _box(
        ax,
        1.1,
        1.5,
        width - 1.2,
        0.55,
        "Linear projection of flattened patches:  $\\mathbf{x}_p^i\\,\\mathbf{E}$",
        COLOURS["embed"],
    )
    ax.text(0.1, 2.47, "$\\mathbf{E}_{pos}$ +\n[class]", ha="center", va="center", fontsize=8)
    _box(
        ax, 0.35, 3.3, width - 0.45, 0.9, f"Transformer encoder ({depth_label} blocks, eq. 2-3)", COLOURS["encoder"], 11
    )
    _arrow(ax, (0.72, 4.25), (0.72, 4.75))
    _box(ax, 0.3, 4.8, 1.6, 0.55, "MLP head (eq. 4)", COLOURS["head"])
    _arrow(ax, (1.95, 5.07), (2.6, 5.07))
    ax.text(2.7, 5.07, "class", va="center", fontsize=10)
    ax.text(0.1, 0.6, "patches", ha="center", va="center", fontsize=8, rotation=90)
    # the block on the right: z -> LN -> MSA -> + -> LN -> MLP -> + (pre-norm, residual connections)
    bx = width + 0.9
    steps = [
        ("Norm", "norm"),
        ("Multi-head attention", "msa"),
        ("+", None),
        ("Norm", "norm"),
        ("MLP", "mlp"),
        ("+", None),
    ]
    for k, (text, colour) in enumerate(steps):
        y = 0.45 + k * 0.8
        if colour is None:
            ax.add_patch(plt.Circle((bx + 1.0, y + 0.2), 0.17, fc="white", ec="0.3"))
            ax.text(bx + 1.0, y + 0.2, "+", ha="center", va="center", fontsize=10)
        else:
            _box(ax, bx + 0.1, y, 1.8, 0.45, text, COLOURS[colour])
        _arrow(ax, (bx + 1.0, y + (0.42 if colour is None else 0.5)), (bx + 1.0, y + 0.78))
    for start, end in ((0.2, 2.3), (2.6, 4.7)):  # the residual connections
        ax.annotate(
            "",
            (bx + 0.85, end),
            (bx + 0.2, start),
            arrowprops=dict(arrowstyle="-|>", connectionstyle="bar,fraction=-0.25", color="0.4"),
        )
    ax.text(bx + 1.0, 0.15, "$\\mathbf{z}_{\\ell-1}$", ha="center", fontsize=9)
    ax.text(bx + 1.0, 5.35, "$\\mathbf{z}_\\ell$   (one of the blocks)", ha="center", fontsize=9)
    ax.set(xlim=(-0.4, bx + 2.4), ylim=(0, 5.7), aspect="equal")
    ax.axis("off")
    ax.set_title("Fig. 1 of the paper: the model (left) and one encoder block (right)", fontsize=11)
    return fig
