"""The Transformer encoder: z'_l = MSA(LN(z_{l-1})) + z_{l-1} (eq. 2), z_l = MLP(LN(z'_l)) + z'_l (eq. 3)."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadSelfAttention


class MLP(nn.Module):
    """Two layers with a GELU non-linearity (section 3.1)."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: drops a residual branch per sample with probability p (not in the paper; a small-data aid)."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[0], *([1] * (x.ndim - 1))).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class EncoderBlock(nn.Module):
    """One pre-LN block (eq. 2-3). `norm_first=False` gives the original Transformer's post-LN block for comparison."""

    def __init__(
        self,
        dim: int,
        heads: int,
        mlp_dim: int,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        drop_path: float = 0.0,
        qkv_bias: bool = True,
        fused: bool = True,
        norm_first: bool = True,
        relative_tokens: int | None = None,
        eps: float = 1e-6,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = MultiHeadSelfAttention(dim, heads, qkv_bias, attn_dropout, fused, relative_tokens)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = MLP(dim, mlp_dim, dropout)
        self.drop = nn.Dropout(dropout)
        self.drop_path = DropPath(drop_path)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self._after_attention(z, self.attn(self._attention_input(z)))

    def forward_with_weights(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the block's output, its attention weights A (B, heads, N, N)), attention written out."""
        a, weights = self.attn.forward_with_weights(self._attention_input(z))
        return self._after_attention(z, a), weights

    def _attention_input(self, z: torch.Tensor) -> torch.Tensor:
        return self.norm1(z) if self.norm_first else z

    def _after_attention(self, z: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        if self.norm_first:
            z = z + self.drop_path(self.drop(a))  # eq. (2)
            return z + self.drop_path(self.mlp(self.norm2(z)))  # eq. (3)
        z = self.norm1(z + self.drop_path(self.drop(a)))  # post-LN (Vaswani et al. 2017): LN(x + Sublayer(x))
        return self.norm2(z + self.drop_path(self.mlp(z)))
