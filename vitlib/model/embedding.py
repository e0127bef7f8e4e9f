"""Patch embedding E and the [class] token: z0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos (eq. 1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .patches import check_patch_size, patchify


class PatchEmbedding(nn.Module):
    """The linear projection E in R^{(P^2 C) x D} of eq. (1), applied either to flattened patches or as a
    Conv2d with kernel = stride = P (the same numbers; `conv=True` is the fast path, as torchvision's `conv_proj`)."""

    def __init__(
        self, *, image_size: int | tuple[int, int], patch_size: int, in_channels: int, dim: int, conv: bool = True
    ):
        super().__init__()
        self.patch_size, self.in_channels, self.conv = patch_size, in_channels, conv
        self.resize(image_size)
        self.proj = nn.Linear(patch_size * patch_size * in_channels, dim)  # E (weight stored as D x P^2 C)

    def resize(self, image_size: int | tuple[int, int]) -> None:
        """Read images of another size with the same P and E (section 3.2): the patch grid and N follow."""
        self.grid = check_patch_size(image_size, self.patch_size)  # (H/P, W/P), or a clear error
        self.image_size, self.num_patches = image_size, self.grid[0] * self.grid[1]

    def conv_weight(self) -> torch.Tensor:
        """E reshaped as Conv2d filters (D, C, P, P): flattening order (p1 p2 c) -> (c, p1, p2)."""
        p, c = self.patch_size, self.in_channels
        return self.proj.weight.view(-1, p, p, c).permute(0, 3, 1, 2)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.conv:
            # contiguous(): the permuted view has channels-last strides, which would make the convolution convert the
            # whole image batch to channels-last in the forward and again in the backward pass; the weight is small
            x = F.conv2d(images, self.conv_weight().contiguous(), self.proj.bias, stride=self.patch_size)
            return x.flatten(2).transpose(1, 2)  # (B, D, H/P, W/P) -> (B, N, D)
        return self.proj(patchify(images, self.patch_size))


class ClassToken(nn.Module):
    """Prepends the learnable embedding x_class (BERT's [CLS]) whose final state z_L^0 represents the image."""

    def __init__(self, *, dim: int):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.token.expand(x.shape[0], -1, -1), x], dim=1)
