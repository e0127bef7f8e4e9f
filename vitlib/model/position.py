"""Position embeddings E_pos (eq. 1) and the variants of appendix D.4, plus 2D resampling for fine-tuning (section 3.2).

Kinds: "learned" (1D, the paper's default), "none", "learned2d" (X- and Y-embeddings of D/2 each, concatenated),
"sincos2d" (fixed 2D sine-cosine), "relative" (1D relative attention: a bias added to the attention logits,
built in `vitlib.model.attention`; nothing is added to the tokens).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..utils import square_grid
from .config import POS_EMBED_KINDS, check_pos_embed

__all__ = ["POS_EMBED_KINDS", "PositionEmbedding", "resample_pos_embed", "sincos_2d"]


def resample_pos_embed(
    pos_embed: torch.Tensor,
    new_grid: tuple[int, int],
    old_grid: tuple[int, int] | None = None,
    num_prefix_tokens: int = 1,
    mode: str = "bicubic",
) -> torch.Tensor:
    """2D-interpolate (1, prefix + gh*gw, D) position embeddings to another patch grid (section 3.2); the prefix
    ([class]) rows are kept apart. `mode` 'bicubic' is timm's; the original release zooms linearly ('bilinear')."""
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    n, dim = grid.shape[1], grid.shape[2]
    old_grid = square_grid(n, "patch position embeddings") if old_grid is None else tuple(old_grid)
    if old_grid[0] * old_grid[1] != n:
        raise ValueError(
            f"old_grid {old_grid} has {old_grid[0] * old_grid[1]} cells but there are {n} patch embeddings."
        )
    if tuple(old_grid) == tuple(new_grid):
        return pos_embed
    grid = grid.reshape(1, *old_grid, dim).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=tuple(new_grid), mode=mode, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], dim).to(pos_embed.dtype)
    return torch.cat([prefix, grid], dim=1)


def sincos_2d(grid: tuple[int, int], dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """Fixed 2D sine-cosine embeddings (gh*gw, D): D/4 frequencies each for sin(y), cos(y), sin(x), cos(x)."""
    if dim % 4:
        raise ValueError(f"sincos2d position embeddings need a width divisible by 4, got dim={dim}.")
    rows, cols = torch.arange(grid[0], dtype=torch.float32), torch.arange(grid[1], dtype=torch.float32)
    y, x = torch.meshgrid(rows, cols, indexing="ij")
    omega = 1.0 / temperature ** (torch.arange(dim // 4, dtype=torch.float32) / (dim // 4))
    y, x = y.flatten()[:, None] * omega, x.flatten()[:, None] * omega
    return torch.cat([y.sin(), y.cos(), x.sin(), x.cos()], dim=1)


class PositionEmbedding(nn.Module):
    """Adds E_pos to the token sequence (B, prefix + N, D). `kind` picks the variant (module docstring)."""

    def __init__(self, *, kind: str, grid: tuple[int, int], dim: int, num_prefix_tokens: int = 1):
        super().__init__()
        self.kind, self.grid, self.dim = check_pos_embed(kind), tuple(grid), dim
        self.num_prefix_tokens = num_prefix_tokens
        n = grid[0] * grid[1]
        if kind == "learned":
            self.weight = nn.Parameter(torch.randn(1, num_prefix_tokens + n, dim) * 0.02)
        elif kind == "learned2d":
            if dim % 2:
                raise ValueError(f"learned2d position embeddings need an even width (D/2 per axis), got dim={dim}.")
            self.rows = nn.Parameter(torch.randn(grid[0], dim // 2) * 0.02)  # Y-embedding
            self.cols = nn.Parameter(torch.randn(grid[1], dim // 2) * 0.02)  # X-embedding
            self.prefix = nn.Parameter(torch.randn(1, num_prefix_tokens, dim) * 0.02)
        elif kind == "sincos2d":
            self.register_buffer("fixed", sincos_2d(self.grid, dim)[None], persistent=False)

    def embeddings(self) -> torch.Tensor | None:
        """E_pos as a (1, prefix + N, D) tensor (None for "none" and "relative")."""
        if self.kind == "learned":
            return self.weight
        if self.kind == "learned2d":
            gh, gw = self.grid
            grid = torch.cat([self.rows[:, None].expand(gh, gw, -1), self.cols[None].expand(gh, gw, -1)], dim=-1)
            return torch.cat([self.prefix, grid.reshape(1, gh * gw, self.dim)], dim=1)
        if self.kind == "sincos2d":
            prefix = self.fixed.new_zeros(1, self.num_prefix_tokens, self.dim)
            return torch.cat([prefix, self.fixed], dim=1)
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = self.embeddings()
        return x if pos is None else x + pos

    @torch.no_grad()
    def resize(self, new_grid: tuple[int, int], mode: str = "bicubic") -> None:
        """Resample to another patch grid (section 3.2): 2D interpolation for "learned" (`mode`, as
        `resample_pos_embed`), 1D for each axis of "learned2d", recomputed for "sincos2d"."""
        new_grid = tuple(new_grid)
        if self.kind == "learned":
            pos = resample_pos_embed(self.weight, new_grid, self.grid, self.num_prefix_tokens, mode)
            self.weight = nn.Parameter(pos)
        elif self.kind == "learned2d":

            def interp(table, size):
                return F.interpolate(table.T[None], size=size, mode="linear", align_corners=False)[0].T.contiguous()

            self.rows = nn.Parameter(interp(self.rows, new_grid[0]))
            self.cols = nn.Parameter(interp(self.cols, new_grid[1]))
        elif self.kind == "sincos2d":
            self.fixed = sincos_2d(new_grid, self.dim).to(self.fixed.device)[None]
        self.grid = new_grid

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}, grid={self.grid}, dim={self.dim}"
