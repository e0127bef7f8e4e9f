"""What a ViT costs: forward FLOPs per image from its `ViTConfig` (a hybrid's CNN stem measured), sequence lengths.

Only matrix multiplications count, 2 FLOPs per multiply-add (as `torch.utils.flop_counter.FlopCounterMode`): x_p E,
then per layer, with L = N + 1 tokens, width D and MLP size M,

    qkv 2 L D 3D + logits 2 L^2 D + A v 2 L^2 D + proj 2 L D D + MLP 2 L D M 2 = 8 L D^2 + 4 L D M + 4 L^2 D

(only 4 L^2 D grows with the square of N), then the head. torchvision's `_ops`, timm, fvcore and DeiT quote
multiply-adds as "GFLOPs" (ViT-B/16: 17.6): half the FLOPs counted here and in the paper's exaFLOPs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ..model import HybridEmbedding, VisionTransformer, ViTConfig, check_patch_size, parse_name
from ..utils import pair

PARTS = ("patch_embed", "qkv", "attn_logits", "attn_values", "attn_proj", "mlp", "head")
QUADRATIC = ("attn_logits", "attn_values")  # the parts that grow with N^2


# ------------------------------------------------------------------------------------------------------- FLOPs
def vit_flops(config: ViTConfig, visible: int | None = None) -> dict[str, int]:
    """FLOPs of one forward pass of one image of a plain ViT, per part (PARTS) and in 'total'; the heads split D,
    so their number does not change the count. `visible`: how many patch tokens the blocks see (default all N, fewer
    in MAE's encoder); the patch embedding is still counted over all N, as MAE embeds every patch first."""
    if config.hybrid:
        raise ValueError(
            "vit_flops counts plain ViTs; for a hybrid, count the built model with model_flops(model), "
            "which measures the CNN stem."
        )
    if config.pos_embed == "relative":
        raise ValueError(
            "vit_flops does not count the relative-attention logits; use pos_embed='learned' (or another "
            "absolute kind) or FlopCounterMode."
        )
    p, d, m = config.patch_size, config.dim, config.mlp_dim
    gh, gw = check_patch_size(config.image_size, p)
    n = gh * gw
    if visible is None:
        visible = n
    if isinstance(visible, bool) or not isinstance(visible, int) or not 0 <= visible <= n:
        raise ValueError(f"visible must be a number of patches from 0 to N = {n}, got {visible!r}.")
    tokens = visible + config.num_prefix_tokens
    per_layer = {
        "qkv": 2 * tokens * d * 3 * d,
        "attn_logits": 2 * tokens * tokens * d,  # every head: L x L logits of D/heads products each
        "attn_values": 2 * tokens * tokens * d,
        "attn_proj": 2 * tokens * d * d,
        "mlp": 2 * tokens * d * m * 2,
    }
    k, hidden = config.num_classes, config.head_hidden
    head = 0 if k <= 0 else 2 * (d * hidden + hidden * k) if hidden else 2 * d * k
    out = {
        "patch_embed": 2 * n * (p * p * config.in_channels) * d,
        **{name: config.depth * v for name, v in per_layer.items()},
        "head": head,
    }
    out = {name: out[name] for name in PARTS}
    out["total"] = sum(out.values())
    return out


def model_flops(model: nn.Module | ViTConfig | str, **overrides) -> dict[str, int]:
    """Forward FLOPs per image of a built VisionTransformer, a ViTConfig or a name such as 'ViT-B/16' (224x224 RGB,
    1000 classes), with `overrides` (image_size=384, ...) applied to its config. 'stem': a hybrid's CNN, measured."""
    if isinstance(model, str):
        model = ViTConfig(**{**parse_name(model), **overrides})
    elif isinstance(model, ViTConfig):
        model = model.replace(**overrides)
    elif isinstance(model, VisionTransformer):
        if isinstance(model.patch_embed, HybridEmbedding):
            return hybrid_flops(model)
        model = model.config.replace(**overrides)
    else:
        raise TypeError(
            f"expected a vitlib VisionTransformer, a ViTConfig or a model name, got {type(model).__name__}."
        )
    return {"stem": 0, **vit_flops(model)}


def stem_flops(backbone: nn.Module, image_size, in_channels: int) -> int:
    """FLOPs of a CNN (a hybrid's stem, or a ResNet baseline) on one image, measured with FlopCounterMode."""
    h, w = pair(image_size, "image_size")
    was_training = backbone.training
    x = torch.zeros(1, in_channels, h, w, device=next(backbone.parameters()).device)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        backbone.eval()(x)
    backbone.train(was_training)
    return int(counter.get_total_flops())


def hybrid_flops(model: VisionTransformer) -> dict[str, int]:
    """A hybrid as section 3.1 describes it: the CNN (measured), then a plain ViT on its feature map (C' channels)
    cut into 1x1 patches, whose patch embedding costs 2 N C' D."""
    embed = model.patch_embed
    rest = vit_flops(
        model.config.replace(
            hybrid=None, image_size=tuple(embed.grid), patch_size=1, in_channels=embed.feature_channels
        )
    )
    stem = stem_flops(embed.backbone, model.config.image_size, model.config.in_channels)
    return {"stem": stem, **{k: v for k, v in rest.items() if k != "total"}, "total": stem + rest["total"]}


def attention_share(flops: dict[str, int]) -> float:
    """Fraction of the total that is quadratic in N (attention logits and A v)."""
    return sum(flops[k] for k in QUADRATIC) / flops["total"]


# ------------------------------------------------------------------------------------------ sizes and shapes
def sequence_length(image_size: int | tuple[int, int], patch_size: int, class_token: bool = False) -> int:
    """N = HW / P^2 patches (section 3.1), plus one when the [class] token is counted."""
    gh, gw = check_patch_size(image_size, patch_size)
    return gh * gw + (1 if class_token else 0)
