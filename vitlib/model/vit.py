"""The Vision Transformer (section 3.1, eq. 1-4), built from a `ViTConfig`; the variants of Table 1 by name."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..utils import pair
from .attention import record_attention
from .config import ViTConfig, parse_name
from .embedding import ClassToken, PatchEmbedding
from .encoder import EncoderBlock, PostNormEncoderBlock
from .heads import ClassifierHead
from .hybrid import HybridEmbedding, hybrid_stem
from .position import PositionEmbedding


class VisionTransformer(nn.Module):
    """z0 = [x_class; x_p E] + E_pos (1); L pre-LN blocks (2, 3); y = LN(z_L^0) (4); then a classifier head.

    Built from a config, `VisionTransformer(config)`, or from its options, `VisionTransformer(image_size=28, ...)`
    (options given beside a config replace its values). `forward(images)` is `forward_head(forward_features(images))`;
    `attention_maps(images)` gives every layer's attention weights."""

    def __init__(self, config: ViTConfig | None = None, **options):
        super().__init__()
        config = ViTConfig(**options) if config is None else config.replace(**options) if options else config
        self.config = c = config
        if c.hybrid:
            stem = hybrid_stem(c.hybrid, c.patch_size, c.in_channels)
            self.patch_embed = HybridEmbedding(
                backbone=stem, image_size=c.image_size, in_channels=c.in_channels, dim=c.dim, stride=c.patch_size
            )
        else:
            self.patch_embed = PatchEmbedding(
                image_size=c.image_size,
                patch_size=c.patch_size,
                in_channels=c.in_channels,
                dim=c.dim,
                conv=c.conv_patch_embed,
            )
        self.cls_token = ClassToken(dim=c.dim) if c.class_token else None
        self.pos_embed = PositionEmbedding(
            kind=c.pos_embed, grid=self.patch_embed.grid, dim=c.dim, num_prefix_tokens=c.num_prefix_tokens
        )
        self.dropout = nn.Dropout(c.dropout)
        block = EncoderBlock if c.norm_first else PostNormEncoderBlock
        self.blocks = nn.ModuleList(
            [
                block(
                    dim=c.dim,
                    heads=c.heads,
                    mlp_dim=c.mlp_dim,
                    dropout=c.dropout,
                    attn_dropout=c.attn_dropout,
                    drop_path=c.drop_path * i / max(c.depth - 1, 1),
                    qkv_bias=c.qkv_bias,
                    fused=c.fused,
                    relative_tokens=self.num_patches + c.num_prefix_tokens if c.pos_embed == "relative" else None,
                )
                for i in range(c.depth)
            ]
        )
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.head = ClassifierHead(
            dim=c.dim, num_classes=c.num_classes, hidden=c.head_hidden, zero_init=c.head_hidden is None
        )
        self._init_weights()

    def _init_weights(self) -> None:
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear) and not name.startswith(("head", "patch_embed.backbone")):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    # the sizes, read off the config (which changes only by set_image_size)
    @property
    def image_size(self) -> tuple[int, int]:
        return self.config.size

    @property
    def in_channels(self) -> int:
        return self.config.in_channels

    @property
    def pool(self) -> str:
        return self.config.pool

    @property
    def num_prefix_tokens(self) -> int:
        return self.config.num_prefix_tokens

    @property
    def num_patches(self) -> int:
        return self.patch_embed.num_patches

    def check_input(self, images: torch.Tensor) -> None:
        """Raise a clear error when images are not (B, C, H, W) of the size and channels the model was built for."""
        if images.ndim != 4:
            raise ValueError(
                f"expected a batch of images (B, C, H, W), got a tensor of shape {tuple(images.shape)}; "
                f"for one image use images.unsqueeze(0)."
            )
        if images.shape[1] != self.in_channels:
            raise ValueError(
                f"the model expects {self.in_channels}-channel images, got {images.shape[1]} channels: "
                f"convert the images (e.g. grayscale <-> RGB) or build the model with "
                f"in_channels={images.shape[1]}."
            )
        if tuple(images.shape[-2:]) != self.image_size:
            h, w = self.image_size
            raise ValueError(
                f"the model was built for {h}x{w} images, got {images.shape[-2]}x{images.shape[-1]}: "
                f"resize the images (torchvision.transforms.v2.Resize(({h}, {w}))) or call "
                f"model.set_image_size({tuple(images.shape[-2:])}) to interpolate E_pos (section 3.2)."
            )

    def forward_features(
        self,
        images: torch.Tensor,
        keep: torch.Tensor | None = None,
        corrupt: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Eq. (1)-(3) and the final LN: images (B, C, H, W) -> the normalised z_L (B, prefix + N, D).

        `keep` (B, K) patch indices: only those patches, each with its own E_pos, go on (MAE): (B, prefix + K, D).
        `corrupt`: a function applied to x_p E (B, N, D) before eq. (1) (masked patch prediction's corruption)."""
        self.check_input(images)
        x = self.patch_embed(images)  # x_p E: (B, N, D)
        if corrupt is not None:
            x = corrupt(x)
        # eq. (1): z0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos, then the embedding dropout (Appendix B.1)
        if keep is None:
            z = self.pos_embed(self.cls_token(x) if self.cls_token is not None else x)
        else:  # MAE: only the kept patches go on, each with its own E_pos, [class] with its own
            pos, prefix = self.pos_embed.embeddings(), self.num_prefix_tokens
            if pos is None:
                raise ValueError(
                    f"keeping some patches needs an absolute E_pos per patch; this model has "
                    f"pos_embed={self.config.pos_embed!r}: use 'learned', 'learned2d' or 'sincos2d'."
                )
            z = torch.gather(x + pos[:, prefix:], 1, keep[..., None].expand(-1, -1, x.shape[-1]))
            if self.cls_token is not None:
                z = torch.cat([(self.cls_token.token + pos[:, :prefix]).expand(len(z), -1, -1), z], dim=1)
        z = self.dropout(z)
        for block in self.blocks:  # eq. (2)-(3)
            z = block(z)
        return self.norm(z)  # LN(z_L), every token

    def forward_head(self, tokens: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Eq. (4) and the head: y = LN(z_L^0), the [class] token (or, with pool 'gap', the mean of the patch tokens),
        from forward_features' tokens (B, prefix + N, D); the head's logits (B, K), or y (B, D) when `pre_logits`."""
        y = tokens[:, 0] if self.pool == "cls" else tokens[:, self.num_prefix_tokens :].mean(dim=1)
        return y if pre_logits else self.head(y)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images (B, C, H, W) -> logits (B, K)."""
        return self.forward_head(self.forward_features(images))

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights softmax(q k^T / sqrt(D_h)) of every layer, each (B, heads, L, L), for analysis: one
        forward pass with the attention written out (`record_attention`)."""
        with record_attention(self.blocks) as weights:
            self.forward_features(images)
        return weights

    @torch.no_grad()
    def set_image_size(self, image_size: int | tuple[int, int], mode: str = "bicubic") -> None:
        """Fine-tune at another resolution (section 3.2): keep P, resample E_pos to the new patch grid in 2D (`mode`,
        as `resample_pos_embed`); the model gets a new config with the new image size."""
        size, old_grid = pair(image_size, "image_size"), tuple(self.patch_embed.grid)
        self.patch_embed.resize(size)  # the new grid, checked (a hybrid refuses)
        grid = self.patch_embed.grid
        self.pos_embed.resize(grid, mode)
        for block in self.blocks:
            if block.attn.rel_pos is not None:
                block.attn.rel_pos.resize(old_grid, grid, self.num_prefix_tokens)
        self.config = self.config.replace(image_size=size[0] if size[0] == size[1] else size)


def create_model(
    name: str, num_classes: int = 1000, image_size: int = 224, in_channels: int = 3, **overrides
) -> VisionTransformer:
    """A model by name, e.g. create_model('ViT-B/16', num_classes=10, image_size=384); keyword overrides win."""
    options = {**parse_name(name), "num_classes": num_classes, "image_size": image_size, "in_channels": in_channels}
    return VisionTransformer(ViTConfig(**{**options, **overrides}))


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """The number of parameters (those that require gradients, with trainable_only)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
