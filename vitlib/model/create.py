"""A model by name: create_model('ViT-B/16', num_classes=10, image_size=384), the paper's ViT or, when the options
name one, its variant (`vitlib.model.variants.build_vit`)."""

from __future__ import annotations

from .config import ViTConfig, parse_name
from .variants import build_vit
from .vit import VisionTransformer


def create_model(
    name: str,
    num_classes: int = 1000,
    image_size: int = 224,
    in_channels: int = 3,
    *,
    fused: bool = True,
    conv_patch_embed: bool = True,
    **overrides,
) -> VisionTransformer:
    """Table 1's variant `name` with P from the name ('ViT-B/16', 'R50+ViT-B/16', 'ViT-Micro/4'); keyword overrides
    of any ViTConfig option win. `fused`, `conv_patch_embed`: how attention and E run (not in the config)."""
    options = {**parse_name(name), "num_classes": num_classes, "image_size": image_size, "in_channels": in_channels}
    return build_vit(ViTConfig(**{**options, **overrides}), fused=fused, conv_patch_embed=conv_patch_embed)
