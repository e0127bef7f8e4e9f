"""The variants one notebook each studies: E_pos in 2D, sine-cosine or relative (appendix D.4, notebook 09), post-LN
(04, 11), a CNN stem (13), put in place of the paper's pieces by `VariantViT`; `build_vit`, `create_model`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ViTConfig, parse_name
from .hybrid import HybridEmbedding, hybrid_stem
from .vit import EncoderBlock, MultiHeadSelfAttention, VisionTransformer


def sincos_2d(grid: tuple[int, int], dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Fixed 2D sine-cosine embeddings (gh*gw, D): D/4 frequencies each for sin(y), cos(y), sin(x), cos(x)."""
    if dim % 4:
        raise ValueError(f"sincos2d position embeddings need a width divisible by 4, got dim={dim}.")
    rows, cols = torch.arange(grid[0], dtype=torch.float32), torch.arange(grid[1], dtype=torch.float32)
    y, x = torch.meshgrid(rows, cols, indexing="ij")
    omega = 1.0 / temperature ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    y, x = y.flatten()[:, None] * omega, x.flatten()[:, None] * omega
    return torch.cat([y.sin(), y.cos(), x.sin(), x.cos()], dim=1)


class LearnedPosition2D(nn.Module):
    """2D E_pos: learned Y (per row) and X (per column) embeddings, D/2 each, concatenated; a [class] row of its own."""

    def __init__(self, *, grid: tuple[int, int], dim: int, num_prefix_tokens: int = 1):
        super().__init__()
        if dim % 2:
            raise ValueError(f"learned2d position embeddings need an even width (D/2 per axis), got dim={dim}.")
        self.grid, self.dim = tuple(grid), dim
        self.rows = nn.Parameter(torch.randn(grid[0], dim // 2) * 0.02)  # Y-embedding
        self.cols = nn.Parameter(torch.randn(grid[1], dim // 2) * 0.02)  # X-embedding
        self.prefix = nn.Parameter(torch.randn(1, num_prefix_tokens, dim) * 0.02)

    def forward(self) -> torch.Tensor:
        gh, gw = self.grid
        grid = torch.cat([self.rows[:, None].expand(gh, gw, -1), self.cols[None].expand(gh, gw, -1)], dim=-1)
        return torch.cat([self.prefix, grid.reshape(1, gh * gw, self.dim)], dim=1)

    @torch.no_grad()
    def resize(self, grid: tuple[int, int]) -> None:
        """Another patch grid (section 3.2): each axis's table interpolated linearly."""

        def interp(table, size):
            return F.interpolate(table.T[None], size=size, mode="linear", align_corners=False)[0].T.contiguous()

        self.rows, self.cols = nn.Parameter(interp(self.rows, grid[0])), nn.Parameter(interp(self.cols, grid[1]))
        self.grid = tuple(grid)


class SinCosPosition2D(nn.Module):
    """Fixed 2D sine-cosine E_pos (`sincos_2d`), zero for the [class] token. forward() -> E_pos (1, prefix + N, D)."""

    def __init__(self, *, grid: tuple[int, int], dim: int, num_prefix_tokens: int = 1):
        super().__init__()
        self.dim, self.num_prefix_tokens = dim, num_prefix_tokens
        self.register_buffer("fixed", sincos_2d(tuple(grid), dim)[None], persistent=False)

    def forward(self) -> torch.Tensor:
        return torch.cat([self.fixed.new_zeros(1, self.num_prefix_tokens, self.dim), self.fixed], dim=1)

    def resize(self, grid: tuple[int, int]) -> None:
        self.fixed = sincos_2d(tuple(grid), self.dim).to(self.fixed.device)[None]


class RelativePosition(nn.Module):
    """1D relative attention (appendix D.4): a learned r per offset i - j; q_i . r_{i-j} joins the logits."""

    def __init__(self, *, num_tokens: int, head_dim: int):
        super().__init__()
        self.num_tokens = num_tokens
        self.table = nn.Parameter(torch.randn(2 * num_tokens - 1, head_dim) * 0.02)
        idx = torch.arange(num_tokens)
        self.register_buffer("offsets", idx[:, None] - idx[None, :] + num_tokens - 1, persistent=False)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        """q (B, H, L, D_h) -> additive logits (B, H, L, L)."""
        if q.shape[-2] != self.num_tokens:
            raise ValueError(f"relative attention was built for {self.num_tokens} tokens, got {q.shape[-2]}.")
        return torch.einsum("bhid,ijd->bhij", q, self.table[self.offsets])

    @torch.no_grad()
    def resize(self, old_grid: tuple[int, int], new_grid: tuple[int, int], prefix: int) -> None:
        """A new patch grid (section 3.2): each new offset, split into rows (the nearest) and columns of the new grid,
        is scaled to the old grid and read from the old table linearly (the same grid: the same table)."""
        (h, w), (h2, w2) = old_grid, new_grid
        num_tokens = h2 * w2 + prefix
        new = torch.arange(-(num_tokens - 1), num_tokens, dtype=torch.float64, device=self.table.device)
        rows = torch.round(new / w2)
        at = rows * (h / h2) * w + (new - rows * w2) * (w / w2) + (self.num_tokens - 1)  # a place in the old table
        at = at.clamp(0, len(self.table) - 1)
        lo = at.floor().long()
        hi = (lo + 1).clamp(max=len(self.table) - 1)
        frac = (at - lo).to(self.table.dtype)[:, None]
        self.table = nn.Parameter(self.table[lo] * (1 - frac) + self.table[hi] * frac)
        self.num_tokens = num_tokens
        idx = torch.arange(num_tokens, device=self.table.device)
        self.offsets = idx[:, None] - idx[None, :] + num_tokens - 1


class RelativeAttention(MultiHeadSelfAttention):
    """MSA whose logits get the relative position term of `RelativePosition` (`rel_pos`)."""

    def __init__(self, *, num_tokens: int, **options):
        super().__init__(**options)
        self.rel_pos = RelativePosition(num_tokens=num_tokens, head_dim=self.head_dim)

    def logit_bias(self, q: torch.Tensor) -> torch.Tensor:
        return self.rel_pos(q)


class PostNormEncoderBlock(EncoderBlock):
    """The original Transformer's post-LN block, LN(x + Sublayer(x)): `EncoderBlock`'s modules in another order."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = self.norm1(z + self.drop_path(self.drop(self.attn(z))))
        return self.norm2(z + self.drop_path(self.mlp(z)))


class VariantViT(VisionTransformer):
    """The ViT with the variants its config names in place of the paper's pieces (E_pos, the block, E)."""

    def make_patch_embed(self, c: ViTConfig, conv: bool) -> nn.Module:
        if not c.hybrid:
            return super().make_patch_embed(c, conv)
        stem = hybrid_stem(c.hybrid, c.patch_size, c.in_channels)
        return HybridEmbedding(
            backbone=stem, image_size=c.image_size, in_channels=c.in_channels, dim=c.dim, stride=c.patch_size
        )

    def make_pos_embed(self, c: ViTConfig) -> None:
        kind = {"learned2d": LearnedPosition2D, "sincos2d": SinCosPosition2D}.get(c.pos_embed)
        self.pos_embed, self.pos_embed_2d = None, None
        if kind:
            self.pos_embed_2d = kind(grid=self.patch_embed.grid, dim=c.dim, num_prefix_tokens=c.num_prefix_tokens)
        elif c.pos_embed != "relative":  # relative: nothing added to the tokens (the attention has it)
            super().make_pos_embed(c)

    def position_embedding(self) -> torch.Tensor | None:
        return self.pos_embed if self.pos_embed_2d is None else self.pos_embed_2d()

    def make_block(self, c: ViTConfig, i: int, fused: bool) -> nn.Module:
        block = EncoderBlock if c.norm_first else PostNormEncoderBlock
        relative = dict(attn=RelativeAttention, num_tokens=self.num_patches + c.num_prefix_tokens)
        return super().make_block(c, i, fused, block, **(relative if c.pos_embed == "relative" else {}))

    def resize_pos_embed(self, old_grid: tuple[int, int], grid: tuple[int, int], mode: str) -> None:
        super().resize_pos_embed(old_grid, grid, mode)
        if self.pos_embed_2d is not None:
            self.pos_embed_2d.resize(grid)
        for block in self.blocks:
            if isinstance(block.attn, RelativeAttention):
                block.attn.rel_pos.resize(old_grid, grid, self.num_prefix_tokens)


def build_vit(config: ViTConfig, **execution) -> VisionTransformer:
    """The model of `config`: the paper's ViT, or `VariantViT` for a variant. `execution`: fused, conv_patch_embed."""
    return (VariantViT if config.variant else VisionTransformer)(config, **execution)


def create_model(
    name: str, num_classes=1000, image_size=224, in_channels=3, *, fused=True, conv_patch_embed=True, **overrides
) -> VisionTransformer:
    """Table 1's variant `name`, P from the name ('ViT-B/16', 'R50+ViT-B/16', 'ViT-Micro/4'); `overrides`: options."""
    options = {**parse_name(name), "num_classes": num_classes, "image_size": image_size, "in_channels": in_channels}
    return build_vit(ViTConfig(**{**options, **overrides}), fused=fused, conv_patch_embed=conv_patch_embed)
