"""The Vision Transformer of section 3.1, top to bottom: E, eq. (1) with the [class] token and E_pos, MSA (appendix
A), the MLP, the pre-LN block (eq. 2-3), y (eq. 4), the head. Parameter names are timm's, so its weights load as they
are; the variants one notebook each studies are in `vitlib.model.variants`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ..utils import pair
from .config import ViTConfig, check_heads
from .patches import check_patch_size, patchify, resample_pos_embed


class PatchEmbedding(nn.Module):
    """x_p E (eq. 1): each P x P patch flattened and projected to D, (B, C, H, W) -> (B, N, D). E is stored as a Conv2d
    with kernel = stride = P; `conv=False` applies it as the linear map to `patchify`'s patches (same result)."""

    def __init__(self, *, image_size, patch_size: int, in_channels: int, dim: int, conv: bool = True):
        super().__init__()
        self.patch_size, self.in_channels, self.conv = patch_size, in_channels, conv
        self.resize(image_size)
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

    def resize(self, image_size) -> None:
        """Read images of another size with the same P and E (section 3.2): the patch grid and N follow."""
        self.grid = check_patch_size(image_size, self.patch_size)  # (H/P, W/P), or a clear error
        self.image_size, self.num_patches = image_size, self.grid[0] * self.grid[1]

    def linear_weight(self) -> torch.Tensor:
        """E as the linear map's weight (D, P^2 C), its inputs in `patchify`'s (p1 p2 c) order."""
        return self.proj.weight.permute(0, 2, 3, 1).flatten(1)

    @torch.no_grad()
    def init_weights(self) -> None:
        """Xavier-uniform on E as the (D, P^2 C) matrix it is; the bias zero."""
        w = nn.init.xavier_uniform_(torch.empty_like(self.linear_weight()))
        self.proj.weight.copy_(w.view(len(w), self.patch_size, self.patch_size, -1).permute(0, 3, 1, 2))
        nn.init.zeros_(self.proj.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.conv:
            return self.proj(images).flatten(2).transpose(1, 2)  # (B, D, H/P, W/P) -> (B, N, D)
        return F.linear(patchify(images, self.patch_size), self.linear_weight(), self.proj.bias)


def attention_weights(q: torch.Tensor, k: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A = softmax(q k^T / sqrt(D_h) + bias) (eq. 6), for q, k of shape (..., N, D_h); `bias`: additive logits."""
    logits = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    return (logits if bias is None else logits + bias).softmax(dim=-1)


class MultiHeadSelfAttention(nn.Module):
    """MSA (eq. 5-8): softmax(q k^T / sqrt(D_h)) v per head, then U_msa; fused unless `fused=False` or recording."""

    def __init__(self, *, dim: int, heads: int, qkv_bias: bool = True, attn_dropout: float = 0.0, fused: bool = True):
        super().__init__()
        check_heads(dim, heads)
        self.heads, self.head_dim, self.fused, self.attn_dropout = heads, dim // heads, fused, attn_dropout
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)  # U_qkv, rows ordered (q|k|v, head, d) like timm's
        self.proj = nn.Linear(dim, dim)  # U_msa
        self.recorded: list[torch.Tensor] | None = None  # set by record_attention

    def logit_bias(self, q: torch.Tensor) -> torch.Tensor | None:
        """Logits added before the softmax: none here (relative attention adds some)."""
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        bias, dropout = self.logit_bias(q), self.attn_dropout if self.training else 0.0
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
    """Within the block, every MultiHeadSelfAttention in `module` appends its A (B, heads, N, N) to the yielded list."""
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

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = x.new_empty(x.shape[0], *([1] * (x.ndim - 1))).bernoulli_(1 - self.p)
        return x * keep / (1 - self.p)


class EncoderBlock(nn.Module):
    """One pre-LN block: z'_l = MSA(LN(z_{l-1})) + z_{l-1} (eq. 2), z_l = MLP(LN(z'_l)) + z'_l (eq. 3)."""

    def __init__(self, *, dim: int, heads: int, mlp_dim: int, dropout=0.0, drop_path=0.0, attn=None, **msa_options):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = attn or MultiHeadSelfAttention(dim=dim, heads=heads, **msa_options)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLP(dim=dim, hidden=mlp_dim, dropout=dropout)
        self.drop, self.drop_path = nn.Dropout(dropout), DropPath(drop_path)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z + self.drop_path(self.drop(self.attn(self.norm1(z))))  # eq. (2)
        return z + self.drop_path(self.mlp(self.norm2(z)))  # eq. (3)


class VisionTransformer(nn.Module):
    """z0 = [x_class; x_p E] + E_pos (1); L pre-LN blocks (2, 3); y = LN(z_L^0) (4); then the head. From a `ViTConfig`
    and/or its options; `fused`, `conv_patch_embed`: how attention and E run. Variants build with `build_vit`."""

    def __init__(
        self, config: ViTConfig | None = None, *, fused: bool = True, conv_patch_embed: bool = True, **options
    ):
        super().__init__()
        self.config = c = ViTConfig(**options) if config is None else config.replace(**options) if options else config
        if type(self) is VisionTransformer and c.variant:
            raise ValueError(f"{c.variant} is a variant (vitlib.model.variants): build with vitlib.build_vit(config).")
        self.patch_embed = self.make_patch_embed(c, conv_patch_embed)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim)) if c.class_token else None  # x_class
        self.make_pos_embed(c)  # E_pos
        self.pos_drop = nn.Dropout(c.dropout)  # the embedding dropout (appendix B.1)
        self.blocks = nn.ModuleList([self.make_block(c, i, fused) for i in range(c.depth)])
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        hidden = c.head_hidden  # the pre-training head's tanh layer (section 3.1), or a plain linear head (3.2)
        self.pre_logits = nn.Sequential(nn.Linear(c.dim, hidden), nn.Tanh()) if hidden else nn.Identity()
        self.head = nn.Linear(hidden or c.dim, c.num_classes) if c.num_classes > 0 else nn.Identity()
        self.init_weights()

    def make_patch_embed(self, c: ViTConfig, conv: bool) -> nn.Module:
        return PatchEmbedding(
            image_size=c.image_size, patch_size=c.patch_size, in_channels=c.in_channels, dim=c.dim, conv=conv
        )

    def make_pos_embed(self, c: ViTConfig) -> None:
        n = c.num_prefix_tokens + self.num_patches
        self.pos_embed = nn.Parameter(torch.randn(1, n, c.dim) * 0.02) if c.pos_embed == "learned" else None

    def make_block(self, c: ViTConfig, i: int, fused: bool, block=EncoderBlock, attn=MultiHeadSelfAttention, **extra):
        """Block i, its stochastic depth growing linearly with i; `extra`: options of the attention class `attn`."""
        msa = attn(dim=c.dim, heads=c.heads, qkv_bias=c.qkv_bias, attn_dropout=c.attn_dropout, fused=fused, **extra)
        drop_path = c.drop_path * i / max(c.depth - 1, 1)
        return block(dim=c.dim, heads=c.heads, mlp_dim=c.mlp_dim, attn=msa, dropout=c.dropout, drop_path=drop_path)

    @torch.no_grad()
    def init_weights(self) -> None:
        """As the JAX release: Xavier-uniform for E and the encoder's linear layers, zero biases, a zero linear head."""
        for name, m in self.named_modules():
            if isinstance(m, PatchEmbedding):
                m.init_weights()
            elif isinstance(m, nn.Linear) and not name.startswith(("head", "pre_logits", "patch_embed.backbone")):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        if isinstance(self.head, nn.Linear) and not self.config.head_hidden:
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    image_size = property(lambda self: self.config.size, doc="(H, W), read off the config")
    in_channels = property(lambda self: self.config.in_channels)
    pool = property(lambda self: self.config.pool)
    num_prefix_tokens = property(lambda self: self.config.num_prefix_tokens)
    num_patches = property(lambda self: self.patch_embed.num_patches)

    def check_input(self, images: torch.Tensor) -> None:
        """Raise a clear error when images are not (B, C, H, W) of the size and channels the model was built for."""
        (h, w), shape = self.image_size, tuple(images.shape)
        if images.ndim != 4:
            raise ValueError(f"expected images (B, C, H, W), got shape {shape}; for one image use images.unsqueeze(0).")
        if shape[1] != self.in_channels:
            raise ValueError(
                f"the model expects {self.in_channels}-channel images, got {shape[1]} channels: convert them "
                f"(grayscale <-> RGB) or build the model with in_channels={shape[1]}."
            )
        if shape[2:] != (h, w):
            raise ValueError(
                f"the model was built for {h}x{w} images, got {shape[2]}x{shape[3]}: resize them (transforms.v2."
                f"Resize(({h}, {w}))) or call model.set_image_size({shape[2:]}) to interpolate E_pos (section 3.2)."
            )

    def position_embedding(self) -> torch.Tensor | None:
        """E_pos, (1, prefix + N, D), or None for a model without one."""
        return self.pos_embed

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Eq. (1) from the patch embeddings x = x_p E (B, N, D): z0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos."""
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1)
        pos = self.position_embedding()
        return x if pos is None else x + pos

    def transformer(self, z: torch.Tensor) -> torch.Tensor:
        """The encoder on z0 (B, L, D): the embedding dropout, the L blocks (eq. 2-3), the final LN."""
        z = self.pos_drop(z)
        for block in self.blocks:
            z = block(z)
        return self.norm(z)

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> LN(z_L) for every token, (B, prefix + N, D)."""
        self.check_input(images)
        return self.transformer(self.embed(self.patch_embed(images)))

    def forward_head(self, tokens: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Eq. (4): y = LN(z_L^0) (pool 'gap': the patch tokens' mean); the logits (B, K), or y when `pre_logits`."""
        y = tokens[:, 0] if self.pool == "cls" else tokens[:, self.num_prefix_tokens :].mean(dim=1)
        return y if pre_logits else self.head(self.pre_logits(y))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> logits (B, K)."""
        return self.forward_head(self.forward_features(images))

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's attention weights A, each (B, heads, L, L), from one forward pass (`record_attention`)."""
        with record_attention(self.blocks) as weights:
            self.forward_features(images)
        return weights

    @torch.no_grad()
    def set_image_size(self, image_size, mode: str = "bicubic") -> None:
        """Fine-tune at another resolution (section 3.2): keep P, resample E_pos in 2D to the new grid; a new config."""
        size, old_grid = pair(image_size, "image_size"), tuple(self.patch_embed.grid)
        self.patch_embed.resize(size)  # the new grid, checked (a hybrid refuses)
        self.resize_pos_embed(old_grid, tuple(self.patch_embed.grid), mode)
        self.config = self.config.replace(image_size=size[0] if size[0] == size[1] else size)

    def resize_pos_embed(self, old_grid: tuple[int, int], grid: tuple[int, int], mode: str) -> None:
        if self.pos_embed is not None:
            pos = resample_pos_embed(self.pos_embed, grid, old_grid, self.num_prefix_tokens, mode)
            self.pos_embed = nn.Parameter(pos)


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of parameters (those that require gradients, with trainable_only)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
