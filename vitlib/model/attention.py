"""Multi-head self-attention (appendix A, eq. 5-8): softmax(q k^T / sqrt(D_h)) v for each head, then a projection."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


def attention_weights(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A = softmax(q k^T / sqrt(D_h) + bias) (eq. 6), for q, k of shape (..., N, D_h); `bias`: additive logits."""
    logits = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    return (logits if bias is None else logits + bias).softmax(dim=-1)


class RelativePosition(nn.Module):
    """1D relative attention (appendix D.4): one learned key embedding per offset i - j, whose logits q_i . r_{i-j}
    are added to the content logits before the softmax."""

    def __init__(self, num_tokens: int, head_dim: int):
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
        """For a new patch grid (section 3.2): each new offset, split into rows and columns of the new grid (the
        nearest row), is scaled to the old grid (rows by H/H', columns by W/W') and read from the old table by linear
        interpolation. The same grid gives the same table; the [class] token's offsets follow the same rule."""
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


class MultiHeadSelfAttention(nn.Module):
    """MSA: `forward` sends softmax(q k^T / sqrt(D_h)) v through F.scaled_dot_product_attention when `fused`, else
    writes it out; `forward_with_weights` always writes it out and also returns the weights A."""

    def __init__(
        self,
        dim: int,
        heads: int,
        qkv_bias: bool = True,
        attn_dropout: float = 0.0,
        fused: bool = True,
        relative_tokens: int | None = None,
    ):
        super().__init__()
        if dim % heads:
            raise ValueError(
                f"width dim={dim} is not divisible by heads={heads}: each head gets dim/heads features, "
                f"so choose heads among {[h for h in range(1, dim + 1) if dim % h == 0 and h <= 64]}."
            )
        self.heads, self.head_dim, self.fused = heads, dim // heads, fused
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)  # U_qkv, rows ordered (q|k|v, head, d) like torchvision, timm
        self.proj = nn.Linear(dim, dim)  # U_msa
        self.attn_dropout = attn_dropout
        self.rel_pos = RelativePosition(relative_tokens, self.head_dim) if relative_tokens else None

    def _qkv(self, x: torch.Tensor):
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        return q, k, v, (self.rel_pos(q) if self.rel_pos is not None else None)

    def _merge(self, out: torch.Tensor) -> torch.Tensor:
        return self.proj(rearrange(out, "b h n d -> b n (h d)"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """MSA(x) (eq. 5-8): (B, N, D) -> (B, N, D)."""
        if not self.fused:
            return self.forward_with_weights(x)[0]
        q, k, v, bias = self._qkv(x)
        dropout = self.attn_dropout if self.training else 0.0
        return self._merge(F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout))

    def forward_with_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(MSA(x), the attention weights A (B, heads, N, N)), written out."""
        q, k, v, bias = self._qkv(x)
        weights = attention_weights(q, k, bias)
        out = F.dropout(weights, self.attn_dropout if self.training else 0.0, self.training) @ v
        return self._merge(out), weights
