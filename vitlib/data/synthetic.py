"""Procedural tasks: data sets drawn from a seed, whose label is set by a rule a learner can read, to show what
an architecture's priors can and cannot learn."""

from __future__ import annotations

import torch

from .splits import TensorSplit


def synthetic_position(n: int, size: int = 32, mark: int = 4, seed: int = 0) -> TensorSplit:
    """The label (0-3) is the quadrant that holds a bright `mark` x `mark` square (on a grid of `mark` pixels) on
    uniform noise. Every quadrant sees the same patch contents, so a ViT without E_pos (permutation invariant over
    patches) cannot beat chance (25%); with E_pos it can."""
    g = torch.Generator().manual_seed(seed)
    images = (torch.rand(n, 1, size, size, generator=g) * 0.6 * 255).to(torch.uint8)
    labels = torch.randint(0, 4, (n,), generator=g)
    cells = size // 2 // mark  # mark positions per quadrant side
    for i in range(n):
        qy, qx = divmod(int(labels[i]), 2)
        y = qy * size // 2 + int(torch.randint(0, cells, (1,), generator=g)) * mark
        x = qx * size // 2 + int(torch.randint(0, cells, (1,), generator=g)) * mark
        images[i, :, y : y + mark, x : x + mark] = 255
    return TensorSplit(images, labels)


def relation_glyphs(count: int = 8, size: int = 6, seed: int = 1234) -> torch.Tensor:
    """The task's fixed vocabulary: `count` distinct random binary glyphs of size x size, about half the pixels on."""
    g = torch.Generator().manual_seed(seed)
    while True:
        glyphs = torch.rand(count, size, size, generator=g) < 0.5
        flat = glyphs.flatten(1).float()
        differ = (flat[:, None] != flat[None]).float().sum(-1) + torch.eye(count) * size * size
        if differ.min() >= size * size // 4:  # any two glyphs differ in at least a quarter of their pixels
            return glyphs


def synthetic_relation(
    n: int, size: int = 32, cell: int = 8, seed: int = 0, glyphs: torch.Tensor | None = None, min_distance: int = 2
) -> TensorSplit:
    """Same or different: two glyphs of a fixed vocabulary sit in two cells of a (size / cell)^2 grid at least
    `min_distance` cells apart (Chebyshev), on dim noise; label 1 when they are the same glyph (balanced). A
    convolution sees one glyph at a time until its receptive field spans both; self-attention compares them at once."""
    glyphs = relation_glyphs() if glyphs is None else glyphs
    k, gs = glyphs.shape[0], glyphs.shape[-1]
    if size % cell or gs > cell:
        raise ValueError(f"cells of {cell} px must tile the {size} px image and hold a {gs} px glyph.")
    side = size // cell
    g = torch.Generator().manual_seed(seed)
    images = (torch.rand(n, 1, size, size, generator=g) * 0.25 * 255).to(torch.uint8)
    labels = torch.randint(0, 2, (n,), generator=g)
    cells = torch.cartesian_prod(torch.arange(side), torch.arange(side))
    far = (cells[:, None] - cells[None]).abs().amax(-1) >= min_distance
    pairs = torch.nonzero(far)  # every ordered pair of cells far enough apart
    if len(pairs) == 0:
        raise ValueError(f"no two cells of a {side}x{side} grid are {min_distance} cells apart.")
    where = pairs[torch.randint(0, len(pairs), (n,), generator=g)]
    first = torch.randint(0, k, (n,), generator=g)
    other = (first + torch.randint(1, k, (n,), generator=g)) % k  # a different glyph, uniformly
    second = torch.where(labels == 1, first, other)
    off = (cell - gs) // 2
    for i in range(n):
        for c, glyph in ((cells[where[i, 0]], first[i]), (cells[where[i, 1]], second[i])):
            y, x = int(c[0]) * cell + off, int(c[1]) * cell + off
            images[i, 0, y : y + gs, x : x + gs][glyphs[glyph]] = 255
    return TensorSplit(images, labels)
