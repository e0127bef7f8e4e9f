"""The Transformer encoder: z'_l = MSA(LN(z_{l-1})) + z_{l-1} (eq. 2), z_l = MLP(LN(z'_l)) + z'_l (eq. 3)."""

from __future__ import annotations

import torch
from torch import nn

from .attention import MultiHeadSelfAttention


class MLP(nn.Module):
    """Two layers with a GELU non-linearity (section 3.1)."""

    def __init__(self, *, dim: int, hidden: int, dropout: float = 0.0):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class DropPath(nn.Module):
    """Stochastic depth: drops a residual branch per sample with probability p (not in the paper; a small-data aid)."""

    def __init__(self, *, p: float = 0.0):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[0], *([1] * (x.ndim - 1))).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class EncoderBlock(nn.Module):
    """One pre-LN block (eq. 2-3); `PostNormEncoderBlock` is the original Transformer's post-LN block."""

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        mlp_dim: int,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        drop_path: float = 0.0,
        qkv_bias: bool = True,
        fused: bool = True,
        relative_tokens: int | None = None,
        eps: float = 1e-6,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.attn = MultiHeadSelfAttention(
            dim=dim,
            heads=heads,
            qkv_bias=qkv_bias,
            attn_dropout=attn_dropout,
            fused=fused,
            relative_tokens=relative_tokens,
        )
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.mlp = MLP(dim=dim, hidden=mlp_dim, dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.drop_path = DropPath(p=drop_path)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z + self.drop_path(self.drop(self.attn(self.norm1(z))))  # eq. (2): z'_l = MSA(LN(z_{l-1})) + z_{l-1}
        return z + self.drop_path(self.mlp(self.norm2(z)))  # eq. (3): z_l = MLP(LN(z'_l)) + z'_l


class PostNormEncoderBlock(EncoderBlock):
    """The original Transformer's post-LN block (Vaswani et al. 2017), LN(x + Sublayer(x)), for comparison: the same
    modules and weights as `EncoderBlock`, in another order (`norm_first=False` in the config)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = self.norm1(z + self.drop_path(self.drop(self.attn(z))))
        return self.norm2(z + self.drop_path(self.mlp(z)))
