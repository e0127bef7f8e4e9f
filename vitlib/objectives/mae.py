"""Masked autoencoder (He et al. 2021; beyond section 4.6): hide 75% of the patches, encode only the visible ones with
the ViT, and let a light decoder, given them and a [mask] token at every hidden place, reconstruct the hidden pixels."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..model import EncoderBlock, VisionTransformer, patchify, sincos_2d, unpatchify


def random_masking(batch: int, n: int, ratio: float, generator: torch.Generator | None = None, device=None):
    """Per image, keep a random (1 - ratio) of the N patches: (keep (B, K) ascending indices, mask (B, N) hidden)."""
    k = max(1, round(n * (1 - ratio)))
    where = generator.device if generator is not None else device  # without a generator, draw where the data is
    keep = torch.rand(batch, n, generator=generator, device=where).argsort(dim=1)[:, :k].sort(dim=1).values
    mask = torch.ones(batch, n, dtype=torch.bool, device=where).scatter_(1, keep, False)
    return keep.to(device), mask.to(device)


class MAE(nn.Module):
    """forward(images) -> (loss, prediction (B, N, P^2 C), mask (B, N)): the MSE on the hidden patches (`norm_pix`:
    per-patch normalised pixels)."""

    objective_name = "mae"  # what vitlib.objectives trains it with

    def __init__(
        self,
        vit: VisionTransformer,
        ratio: float = 0.75,
        decoder_dim: int = 64,
        decoder_depth: int = 2,
        decoder_heads: int = 4,
        norm_pix: bool = True,
    ):
        super().__init__()
        if not 0 < ratio < 1:
            raise ValueError(f"mask ratio must be between 0 and 1 (MAE uses 0.75), got {ratio}.")
        if vit.position_embedding() is None:
            raise ValueError(
                f"MAE drops hidden patches before the encoder, so each kept token needs its own absolute E_pos: "
                f"build the ViT with pos_embed 'learned', 'learned2d' or 'sincos2d', not {vit.config.pos_embed!r}."
            )
        if vit.config.hybrid:
            raise ValueError("MAE hides pixel patches: use a pure ViT, not a hybrid.")
        self.vit, self.ratio, self.norm_pix = vit, ratio, norm_pix
        p, c, grid = vit.patch_embed.patch_size, vit.in_channels, vit.patch_embed.grid
        self.patch_size, self.channels, self.grid = p, c, grid
        self.decoder_embed = nn.Linear(vit.config.dim, decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_dim))
        nn.init.normal_(self.mask_token, std=0.02)
        self.register_buffer("decoder_pos", sincos_2d(grid, decoder_dim)[None], persistent=False)
        self.decoder = nn.ModuleList(
            [EncoderBlock(dim=decoder_dim, heads=decoder_heads, mlp_dim=4 * decoder_dim) for _ in range(decoder_depth)]
        )
        self.decoder_norm = nn.LayerNorm(decoder_dim, eps=1e-6)
        self.decoder_pred = nn.Linear(decoder_dim, p * p * c)

    def encode(self, images: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """The ViT on the kept patches only and the [class] token, each with its own E_pos: (B, prefix + K, D)."""
        vit = self.vit
        vit.check_input(images)
        x, pos, prefix = vit.patch_embed(images), vit.position_embedding(), vit.num_prefix_tokens  # x_p E, E_pos
        z = torch.gather(x + pos[:, prefix:], 1, keep[..., None].expand(-1, -1, x.shape[-1]))
        if vit.cls_token is not None:
            z = torch.cat([(vit.cls_token + pos[:, :prefix]).expand(len(z), -1, -1), z], dim=1)
        return vit.transformer(z)

    def decode(self, latent: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Encoded kept patches + [mask] at the hidden places + sin-cos E_pos, the blocks -> pixels per patch."""
        b, n = len(latent), self.grid[0] * self.grid[1]
        x = self.decoder_embed(latent[:, self.vit.num_prefix_tokens :])
        full = self.mask_token.to(x.dtype).expand(b, n, -1).clone()
        full.scatter_(1, keep[..., None].expand(-1, -1, x.shape[-1]), x)
        full = full + self.decoder_pos
        for block in self.decoder:
            full = block(full)
        return self.decoder_pred(self.decoder_norm(full))

    def targets(self, images: torch.Tensor) -> torch.Tensor:
        t = patchify(images, self.patch_size)
        if self.norm_pix:
            t = (t - t.mean(-1, keepdim=True)) / (t.var(-1, keepdim=True) + 1e-6).sqrt()
        return t

    def forward(self, images: torch.Tensor, generator: torch.Generator | None = None):
        keep, mask = random_masking(len(images), self.grid[0] * self.grid[1], self.ratio, generator, images.device)
        pred = self.decode(self.encode(images, keep), keep)
        loss = F.mse_loss(pred[mask].float(), self.targets(images)[mask])
        return loss, pred, mask

    @torch.no_grad()
    def reconstruct(self, images: torch.Tensor, generator: torch.Generator | None = None):
        """(masked input, reconstruction, reconstruction with the visible patches pasted in), (B, C, H, W) each, in the
        input's scale (with norm_pix: each hidden patch's own mean and std)."""
        _, pred, mask = self.forward(images, generator)
        patches = patchify(images, self.patch_size)
        if self.norm_pix:
            pred = pred * (patches.var(-1, keepdim=True) + 1e-6).sqrt() + patches.mean(-1, keepdim=True)
        m = mask[..., None].to(patches.dtype)
        args = (self.patch_size, self.grid, self.channels)
        masked = unpatchify(patches * (1 - m), *args)
        return masked, unpatchify(pred, *args), unpatchify(patches * (1 - m) + pred * m, *args)
