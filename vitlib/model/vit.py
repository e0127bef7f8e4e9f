"""The Vision Transformer (section 3.1, eq. 1-4), built from a `ViTConfig`; the variants of Table 1 by name."""

from __future__ import annotations

import torch
from torch import nn

from ..utils import pair
from .config import ViTConfig, parse_name
from .embedding import ClassToken, PatchEmbedding
from .encoder import EncoderBlock
from .heads import ClassifierHead
from .hybrid import HybridEmbedding, hybrid_stem
from .patches import check_patch_size
from .position import PositionEmbedding


class VisionTransformer(nn.Module):
    """z0 = [x_class; x_p E] + E_pos (1); L pre-LN blocks (2, 3); y = LN(z_L^0) (4); then a classifier head.

    Built from a config, `VisionTransformer(config)`, or from its options, `VisionTransformer(image_size=28, ...)`
    (options given beside a config replace its values)."""

    def __init__(self, config: ViTConfig | None = None, **options):
        super().__init__()
        config = ViTConfig(**options) if config is None else config.replace(**options) if options else config
        self.config = config
        c = config
        if c.hybrid:
            stem = hybrid_stem(c.hybrid, c.patch_size, c.in_channels)
            self.patch_embed = HybridEmbedding(stem, c.image_size, c.in_channels, c.dim, c.patch_size)
        else:
            self.patch_embed = PatchEmbedding(c.image_size, c.patch_size, c.in_channels, c.dim, c.conv_patch_embed)
        self.cls_token = ClassToken(c.dim) if c.class_token else None
        self.pos_embed = PositionEmbedding(c.pos_embed, self.patch_embed.grid, c.dim, c.num_prefix_tokens)
        self.dropout = nn.Dropout(c.dropout)
        rel = self.num_patches + c.num_prefix_tokens if c.pos_embed == "relative" else None
        self.blocks = nn.ModuleList(
            [
                EncoderBlock(
                    c.dim,
                    c.heads,
                    c.mlp_dim,
                    c.dropout,
                    c.attn_dropout,
                    c.drop_path * i / max(c.depth - 1, 1),
                    c.qkv_bias,
                    c.fused,
                    c.norm_first,
                    rel,
                )
                for i in range(c.depth)
            ]
        )
        self.norm = nn.LayerNorm(c.dim, eps=1e-6)
        self.head = ClassifierHead(c.dim, c.num_classes, hidden=c.head_hidden, zero_init=c.head_hidden is None)
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

    def patch_tokens(self, images: torch.Tensor) -> torch.Tensor:
        """x_p E: the embedded patches (B, N, D), checked to be images the model was built for."""
        self.check_input(images)
        return self.patch_embed(images)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Eq. (1): z0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos (with embedding dropout while training)."""
        return self.embed_tokens(self.patch_tokens(images))

    def embed_tokens(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """Eq. (1) from the embedded patches x (B, N, D): add E_pos, prepend [class] (with its own E_pos), dropout.

        `keep` (B, K) indices: only those patches, each with its own E_pos, go on (MAE's visible patches)."""
        if keep is None:
            z = self.cls_token(x) if self.cls_token is not None else x
            return self.dropout(self.pos_embed(z))
        pos, prefix = self.pos_embed.embeddings(), self.num_prefix_tokens
        if pos is None:
            raise ValueError(
                f"keeping some patches needs an absolute E_pos per patch; this model has "
                f"pos_embed={self.config.pos_embed!r}: use 'learned', 'learned2d' or 'sincos2d'."
            )
        x = torch.gather(x + pos[:, prefix:], 1, keep[..., None].expand(-1, -1, x.shape[-1]))
        if self.cls_token is not None:
            x = torch.cat([(self.cls_token.token + pos[:, :prefix]).expand(len(x), -1, -1), x], dim=1)
        return self.dropout(x)

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        """Eq. (2)-(3) and the final LN: the L encoder blocks on tokens z0 (B, T, D) -> z_L normalised (B, T, D)."""
        for block in self.blocks:
            z = block(z)
        return self.norm(z)

    def forward_tokens(self, x: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
        """From embedded patches x (B, N, D) to the normalised z_L (B, prefix + N or K, D); see `embed_tokens`."""
        return self.encode(self.embed_tokens(x, keep))

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """Eq. (1)-(3) and the final LN: z_L normalised, (B, prefix + N, D)."""
        return self.forward_tokens(self.patch_tokens(images))

    def pool_features(self, z: torch.Tensor) -> torch.Tensor:
        """Eq. (4): y = LN(z_L^0) with the [class] token, or the mean of the patch tokens (GAP)."""
        return z[:, 0] if self.pool == "cls" else z[:, self.num_prefix_tokens :].mean(dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool_features(self.forward_features(images)))

    def forward_with_attention(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(z_L normalised, the attention weights softmax(q k^T / sqrt(D_h)) of every layer, each (B, heads, L, L)),
        with the attention written out."""
        z, weights = self.embed(images), []
        for block in self.blocks:
            z, w = block.forward_with_weights(z)
            weights.append(w)
        return self.norm(z), weights

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer, each (B, heads, L, L), for analysis."""
        return self.forward_with_attention(images)[1]

    @torch.no_grad()
    def set_image_size(self, image_size: int | tuple[int, int]) -> None:
        """Fine-tune at another resolution (section 3.2): keep P, resample E_pos to the new patch grid in 2D; the
        model gets a new config with the new image size."""
        size = pair(image_size, "image_size")
        if isinstance(self.patch_embed, HybridEmbedding):
            raise NotImplementedError("set_image_size is not supported for hybrid models; build a new model instead.")
        grid, old_grid = check_patch_size(size, self.patch_embed.patch_size), tuple(self.patch_embed.grid)
        self.pos_embed.resize(grid)
        self.patch_embed.image_size, self.patch_embed.grid = size, grid
        self.patch_embed.num_patches = grid[0] * grid[1]
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
