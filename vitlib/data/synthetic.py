"""Procedural tasks: data sets drawn from a seed, whose label is set by a rule a learner can read, to show what
an architecture's priors can and cannot learn."""

from __future__ import annotations

import torch

from .splits import TensorSplit


def synthetic_position(n: int, size: int = 32, mark: int = 4, seed: int = 0) -> TensorSplit:
    """The label (0-3) is the quadrant that holds a bright `mark` x `mark` square; the background is uniform noise.

    Every quadrant sees the same distribution of patch contents, so a ViT without position embeddings (permutation
    invariant over patches) cannot beat chance (25%); with E_pos it can. Marks are placed on a grid of `mark` pixels.
    """
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
