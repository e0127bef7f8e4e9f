"""Masked patch prediction, the paper's self-supervised objective (section 4.6, Appendix B.1.2): corrupt 50% of the
patch embeddings (80% -> a learnable [mask] embedding, 10% -> a random other patch's embedding, 10% kept) and predict
each corrupted patch's mean colour, quantised to 3 bits per channel (512 classes for RGB, 8 for grayscale)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model import VisionTransformer, patchify


def mean_colour_targets(images: torch.Tensor, patch_size: int, bits: int = 3) -> torch.Tensor:
    """The class of each patch's mean colour: every channel's mean in [0, 1] quantised to 2^bits levels, the channels
    combined as digits in base 2^bits. images (B, C, H, W) in [0, 1] -> (B, N) int64 in [0, 2^(bits C))."""
    b, c = images.shape[:2]
    levels = 2**bits
    means = patchify(images, patch_size).view(b, -1, patch_size * patch_size, c).mean(dim=2)  # (B, N, C)
    q = (means.clamp(0, 1) * levels).long().clamp_max(levels - 1)
    weights = levels ** torch.arange(c - 1, -1, -1, device=images.device)
    return (q * weights).sum(-1)


def corruption_plan(
    batch: int, n: int, ratio=0.5, mask=0.8, random=0.1, generator: torch.Generator | None = None, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted (B, N), round(ratio N) per image; kind (B, N) int8: 0 kept, 1 [mask], 2 another patch, 3 left)."""
    k = round(ratio * n)
    where = generator.device if generator is not None else device  # without a generator, draw where the data is
    rank = torch.rand(batch, n, generator=generator, device=where).argsort(dim=1).argsort(dim=1)
    corrupted = rank < k
    u = torch.rand(batch, n, generator=generator, device=where)
    kind = torch.where(u < mask, 1, torch.where(u < mask + random, 2, 3)).to(torch.int8)
    kind = torch.where(corrupted, kind, torch.zeros_like(kind))
    return corrupted.to(device), kind.to(device)


class MaskedPatchPrediction(nn.Module):
    """Wraps a ViT; forward(images) -> (loss, accuracy on the corrupted patches). `mean` / `std` undo the loader's
    normalisation: the colour targets are computed on [0, 1] pixels."""

    objective_name = "mpp"  # what vitlib.objectives trains it with

    def __init__(self, vit: VisionTransformer, ratio=0.5, mask=0.8, random=0.1, bits=3, mean=(0.0,), std=(1.0,)):
        super().__init__()
        if not 0 < ratio <= 1 or mask < 0 or random < 0 or mask + random > 1:
            raise ValueError(
                f"need 0 < ratio <= 1 and mask + random <= 1 (the rest are kept), got ratio={ratio}, mask={mask}, "
                f"random={random}."
            )
        if vit.config.hybrid:
            raise ValueError("masked patch prediction corrupts pixel patches: use a pure ViT, not a hybrid.")
        self.vit, self.ratio, self.mask_p, self.random_p, self.bits = vit, ratio, mask, random, bits
        dim = vit.config.dim
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        nn.init.trunc_normal_(self.mask_token, std=0.02)
        self.num_classes = (2**bits) ** vit.in_channels
        self.predictor = nn.Linear(dim, self.num_classes)
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)

    def corrupt(self, x: torch.Tensor, generator: torch.Generator | None = None):
        """x (B, N, D) patch embeddings -> corrupted copy and the (B, N) mask of corrupted positions."""
        b, n, d = x.shape
        corrupted, kind = corruption_plan(b, n, self.ratio, self.mask_p, self.random_p, generator, x.device)
        flat = x.reshape(b * n, d)
        where = generator.device if generator is not None else x.device
        other = flat[torch.randint(0, b * n, (b * n,), generator=generator, device=where).to(x.device)].view(b, n, d)
        out = torch.where((kind == 1)[..., None], self.mask_token.to(x.dtype).expand(b, n, d), x)
        out = torch.where((kind == 2)[..., None], other, out)
        return out, corrupted

    def forward(self, images: torch.Tensor, generator: torch.Generator | None = None):
        self.vit.check_input(images)
        pixels = (images * self.std + self.mean).clamp(0, 1)
        targets = mean_colour_targets(pixels, self.vit.patch_embed.patch_size, self.bits)
        x, corrupted = self.corrupt(self.vit.patch_embed(images), generator)  # x_p E, corrupted before eq. (1)
        z = self.vit.transformer(self.vit.embed(x))[:, self.vit.num_prefix_tokens :]
        logits = self.predictor(z[corrupted]).float()
        loss = F.cross_entropy(logits, targets[corrupted])
        return loss, (logits.argmax(-1) == targets[corrupted]).float().mean()
