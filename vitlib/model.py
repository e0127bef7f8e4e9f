"""The Vision Transformer (section 3.1, eq. 1-4) and the model variants of Table 1."""
from __future__ import annotations

import re

import torch
from torch import nn

from .embedding import ClassToken, PatchEmbedding
from .encoder import EncoderBlock
from .heads import ClassifierHead
from .hybrid import HybridEmbedding, hybrid_stem
from .patches import check_patch_size
from .position import PositionEmbedding, check_kind

# Table 1 (plus ViT-Ti from DeiT) and two course sizes that train on a 2-core CPU in minutes.
VARIANTS = {
    "Ti": dict(dim=192, depth=12, heads=3, mlp_dim=768),
    "S": dict(dim=384, depth=12, heads=6, mlp_dim=1536),
    "B": dict(dim=768, depth=12, heads=12, mlp_dim=3072),
    "L": dict(dim=1024, depth=24, heads=16, mlp_dim=4096),
    "H": dict(dim=1280, depth=32, heads=16, mlp_dim=5120),
    "Micro": dict(dim=64, depth=4, heads=4, mlp_dim=128),
    "Mini": dict(dim=128, depth=6, heads=4, mlp_dim=256),
}
_ALIASES = {"Tiny": "Ti", "Small": "S", "Base": "B", "Large": "L", "Huge": "H"}
_NAME = re.compile(r"^(?:(?P<cnn>R\d+(?:-w\d+)?)\+)?ViT-(?P<size>[A-Za-z]+)/(?P<patch>\d+)$")


class VisionTransformer(nn.Module):
    """z0 = [x_class; x_p E] + E_pos (1); L pre-LN blocks (2, 3); y = LN(z_L^0) (4); then a classifier head."""

    def __init__(self, image_size: int = 224, patch_size: int = 16, in_channels: int = 3, num_classes: int = 1000,
                 dim: int = 768, depth: int = 12, heads: int = 12, mlp_dim: int = 3072, pos_embed: str = "learned",
                 pool: str = "cls", class_token: bool | None = None, head_hidden: int | None = None,
                 dropout: float = 0.0, attn_dropout: float = 0.0, drop_path: float = 0.0, qkv_bias: bool = True,
                 fused: bool = True, norm_first: bool = True, hybrid: str | None = None, conv_patch_embed: bool = True):
        super().__init__()
        if pool not in ("cls", "gap"):
            raise ValueError(f"unknown pool {pool!r}: use 'cls' ([class] token, eq. 4) or 'gap' (global average pooling).")
        class_token = (pool == "cls") if class_token is None else class_token
        if pool == "cls" and not class_token:
            raise ValueError("pool='cls' needs the [class] token: set class_token=True or pool='gap'.")
        if dim % heads:
            raise ValueError(f"width dim={dim} is not divisible by heads={heads}.")
        check_kind(pos_embed)
        self.config = dict(image_size=image_size, patch_size=patch_size, in_channels=in_channels,
                           num_classes=num_classes, dim=dim, depth=depth, heads=heads, mlp_dim=mlp_dim,
                           pos_embed=pos_embed, pool=pool, class_token=class_token, head_hidden=head_hidden,
                           dropout=dropout, attn_dropout=attn_dropout, drop_path=drop_path, qkv_bias=qkv_bias,
                           fused=fused, norm_first=norm_first, hybrid=hybrid, conv_patch_embed=conv_patch_embed)
        self.image_size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)  # (H, W)
        self.in_channels, self.pool = in_channels, pool
        if hybrid:
            self.patch_embed = HybridEmbedding(hybrid_stem(hybrid, patch_size, in_channels), image_size, in_channels,
                                               dim, patch_size)
        else:
            check_patch_size(image_size, patch_size)
            self.patch_embed = PatchEmbedding(image_size, patch_size, in_channels, dim, conv=conv_patch_embed)
        self.num_patches = self.patch_embed.num_patches
        self.num_prefix_tokens = 1 if class_token else 0
        self.cls_token = ClassToken(dim) if class_token else None
        self.pos_embed = PositionEmbedding(pos_embed, self.patch_embed.grid, dim, self.num_prefix_tokens)
        self.dropout = nn.Dropout(dropout)
        rel = self.num_patches + self.num_prefix_tokens if pos_embed == "relative" else None
        self.blocks = nn.ModuleList([
            EncoderBlock(dim, heads, mlp_dim, dropout, attn_dropout, drop_path * i / max(depth - 1, 1), qkv_bias, fused,
                         norm_first, rel) for i in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = ClassifierHead(dim, num_classes, hidden=head_hidden, zero_init=head_hidden is None)
        self._init_weights()

    def _init_weights(self) -> None:
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear) and not name.startswith(("head", "patch_embed.backbone")):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias) if m.bias is not None else None

    def check_input(self, images: torch.Tensor) -> None:
        """Raise a clear error when images are not (B, C, H, W) of the size and channels the model was built for."""
        if images.ndim != 4:
            raise ValueError(f"expected a batch of images (B, C, H, W), got a tensor of shape {tuple(images.shape)}; "
                             f"for one image use images.unsqueeze(0).")
        if images.shape[1] != self.in_channels:
            raise ValueError(f"the model expects {self.in_channels}-channel images, got {images.shape[1]} channels: "
                             f"convert the images (e.g. grayscale <-> RGB) or build the model with in_channels={images.shape[1]}.")
        if tuple(images.shape[-2:]) != self.image_size:
            h, w = self.image_size
            raise ValueError(f"the model was built for {h}x{w} images, got {images.shape[-2]}x{images.shape[-1]}: resize "
                             f"the images (torchvision.transforms.v2.Resize(({h}, {w}))) or call "
                             f"model.set_image_size({tuple(images.shape[-2:])}) to interpolate E_pos (section 3.2).")

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Eq. (1): z0 = [x_class; x_p^1 E; ...; x_p^N E] + E_pos."""
        self.check_input(images)
        z = self.patch_embed(images)
        if self.cls_token is not None:
            z = self.cls_token(z)
        return self.dropout(self.pos_embed(z))

    def forward_features(self, images: torch.Tensor, return_attention: bool = False):
        """Eq. (1)-(3) and the final LN: z_L normalised, (B, prefix + N, D); with the attention weights of every layer."""
        z, weights = self.embed(images), []
        for block in self.blocks:
            if return_attention:
                z, w = block(z, return_weights=True)
                weights.append(w)
            else:
                z = block(z)
        z = self.norm(z)
        return (z, weights) if return_attention else z

    def pool_features(self, z: torch.Tensor) -> torch.Tensor:
        """Eq. (4): y = LN(z_L^0) with the [class] token, or the mean of the patch tokens (GAP)."""
        return z[:, 0] if self.pool == "cls" else z[:, self.num_prefix_tokens:].mean(dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool_features(self.forward_features(images)))

    @torch.no_grad()
    def attention_maps(self, images: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights softmax(q k^T / sqrt(D_h)) of every layer, each (B, heads, L, L), for analysis."""
        return self.forward_features(images, return_attention=True)[1]

    def set_image_size(self, image_size: int | tuple[int, int]) -> None:
        """Fine-tune at another resolution (section 3.2): keep P, resample E_pos to the new patch grid in 2D."""
        size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
        if isinstance(self.patch_embed, HybridEmbedding):
            raise NotImplementedError("set_image_size is not supported for hybrid models; build a new model instead.")
        grid = check_patch_size(size, self.patch_embed.patch_size)
        self.pos_embed.resize(grid)
        self.patch_embed.image_size, self.patch_embed.grid = size, grid
        self.patch_embed.num_patches = self.num_patches = grid[0] * grid[1]
        for block in self.blocks:
            if block.attn.rel_pos is not None:
                block.attn.rel_pos.resize(self.num_patches + self.num_prefix_tokens)
        self.image_size = size
        self.config["image_size"] = size[0] if size[0] == size[1] else size


def parse_name(name: str) -> dict:
    """'ViT-B/16' -> Table 1's B with P=16; 'R50+ViT-B/16' -> the hybrid with a ResNet-50 stem of total stride 16;
    'R8+ViT-Micro/4' (or 'R8-w8+...', width 8) -> a small ResNet-8 stem of total stride 4 for 28/32 px images."""
    m = _NAME.match(name.strip())
    size = _ALIASES.get(m["size"], m["size"]) if m else None
    if not m or size not in VARIANTS:
        raise ValueError(f"unknown model variant {name!r}: use 'ViT-<size>/<patch>' with size one of "
                         f"{', '.join(VARIANTS)} (e.g. 'ViT-B/16', 'ViT-Micro/4'), or a hybrid 'R50+ViT-B/16' / 'R8+ViT-Micro/4'.")
    cfg = dict(VARIANTS[size], patch_size=int(m["patch"]))
    if m["cnn"]:
        cfg["hybrid"] = "resnet" + m["cnn"][1:]
    return cfg


def create_model(name: str, num_classes: int = 1000, image_size: int = 224, in_channels: int = 3, **overrides) -> VisionTransformer:
    """A model by name, e.g. create_model('ViT-B/16', num_classes=10, image_size=384); keyword overrides win."""
    return VisionTransformer(**{**parse_name(name), "num_classes": num_classes, "image_size": image_size,
                                "in_channels": in_channels, **overrides})


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
