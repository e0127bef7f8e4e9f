"""Multi-head self-attention (appendix A, eq. 5-8): softmax(q k^T / sqrt(D_h)) v for each head, then a projection."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .config import check_heads


def attention_weights(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A = softmax(q k^T / sqrt(D_h) + bias) (eq. 6), for q, k of shape (..., N, D_h); `bias`: additive logits."""
    logits = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    return (logits if bias is None else logits + bias).softmax(dim=-1)


class RelativePosition(nn.Module):
    """1D relative attention (appendix D.4): one learned key embedding per offset i - j, whose logits q_i . r_{i-j}
    are added to the content logits before the softmax."""

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
    """MSA: softmax(q k^T / sqrt(D_h)) v for each head, then U_msa; through F.scaled_dot_product_attention when
    `fused`, else written out. Inside `record_attention` it is written out and its weights A are kept."""

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        qkv_bias: bool = True,
        attn_dropout: float = 0.0,
        fused: bool = True,
        relative_tokens: int | None = None,
    ):
        super().__init__()
        check_heads(dim, heads)
        self.heads, self.head_dim, self.fused = heads, dim // heads, fused
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)  # U_qkv, rows ordered (q|k|v, head, d) like torchvision, timm
        self.proj = nn.Linear(dim, dim)  # U_msa
        self.attn_dropout = attn_dropout
        self.rel_pos = RelativePosition(num_tokens=relative_tokens, head_dim=self.head_dim) if relative_tokens else None
        self.recorded: list[torch.Tensor] | None = None  # set by record_attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """MSA(x) (eq. 5-8): (B, N, D) -> (B, N, D)."""
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        bias = self.rel_pos(q) if self.rel_pos is not None else None  # relative position logits, or none
        dropout = self.attn_dropout if self.training else 0.0
        if self.fused and self.recorded is None:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout)
        else:
            weights = attention_weights(q, k, bias)  # A (B, heads, N, N)
            if self.recorded is not None:
                self.recorded.append(weights)
            out = F.dropout(weights, dropout, self.training) @ v
        return self.proj(rearrange(out, "b h n d -> b n (h d)"))


@contextmanager
def record_attention(module: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the block, every MultiHeadSelfAttention in `module` writes its attention out and appends its weights A
    (B, heads, N, N) to the list this yields, in the order they run:
    `with record_attention(msa) as weights: out = msa(x)` gives MSA(x) and weights == [A]."""
    weights: list[torch.Tensor] = []
    layers = [m for m in module.modules() if isinstance(m, MultiHeadSelfAttention)]
    before = [layer.recorded for layer in layers]
    for layer in layers:
        layer.recorded = weights
    try:
        yield weights
    finally:
        for layer, recorded in zip(layers, before):
            layer.recorded = recorded
