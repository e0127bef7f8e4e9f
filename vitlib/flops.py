"""Forward FLOPs of a ViT per image, counted analytically from its configuration (Table 1 sizes, any patch size).

Only the matrix multiplications are counted, 2 FLOPs per multiply-add, as `torch.utils.flop_counter.FlopCounterMode`
does: the patch embedding x_p E, and in each of the L layers the qkv projection, the attention logits q k^T, the
weighted sum of the values A v, the output projection and the two MLP layers; then the head. LayerNorm, GELU, softmax,
biases and residual additions are left out (they are linear in N and small). With L = N + 1 tokens ([class] token),
width D, MLP size M and patches of P^2 C values, one layer costs

    qkv 2 L D 3D + logits 2 L^2 D + A v 2 L^2 D + proj 2 L D D + MLP 2 L D M 2 = 8 L D^2 + 4 L D M + 4 L^2 D

so the attention logits and A v (4 L^2 D) are the only part that grows with the square of N.

Beware of units: torchvision's `weights.meta["_ops"]`, timm, fvcore and the DeiT paper quote multiply-adds (MACs)
under the name "GFLOPs" (ViT-B/16: 17.6); in FLOPs, as here and in the ViT paper's exaFLOPs, that is twice as much.
"""
from __future__ import annotations

from torch import nn

from .model import parse_name
from .patches import check_patch_size

PARTS = ("patch_embed", "qkv", "attn_logits", "attn_values", "attn_proj", "mlp", "head")
QUADRATIC = ("attn_logits", "attn_values")  # the parts that grow with N^2


def vit_flops(image_size: int | tuple[int, int] = 224, patch_size: int = 16, dim: int = 768, depth: int = 12,
              mlp_dim: int = 3072, in_channels: int = 3, num_classes: int = 1000, class_token: bool = True,
              head_hidden: int | None = None, pos_embed: str = "learned", hybrid: str | None = None,
              **ignored) -> dict[str, int]:
    """FLOPs of one forward pass of one image, per part (see PARTS) and in 'total'.

    Takes a `VisionTransformer.config` (`vit_flops(**model.config)`) or the sizes of Table 1; other keys of the config
    (heads, dropout, pool, ...) do not change the count and are ignored. The number of heads does not either: the heads
    split D, they do not multiply the work.
    """
    if hybrid:
        raise ValueError("vit_flops counts plain ViTs; a hybrid's CNN stem is not a matrix multiplication of this model. "
                         "Count it with torch.utils.flop_counter.FlopCounterMode.")
    if pos_embed == "relative":
        raise ValueError("vit_flops does not count the relative-attention logits; use pos_embed='learned' (or another "
                         "absolute kind) or FlopCounterMode.")
    p = patch_size
    gh, gw = check_patch_size(image_size, p)  # a clear error when P does not divide the image
    n = gh * gw
    tokens, d, m = n + (1 if class_token else 0), dim, mlp_dim
    per_layer = {
        "qkv": 2 * tokens * d * 3 * d,
        "attn_logits": 2 * tokens * tokens * d,   # every head: L x L logits of D/heads products each
        "attn_values": 2 * tokens * tokens * d,
        "attn_proj": 2 * tokens * d * d,
        "mlp": 2 * tokens * d * m * 2,
    }
    head = 0
    if num_classes > 0:
        head = 2 * (d * head_hidden + head_hidden * num_classes) if head_hidden else 2 * d * num_classes
    out = {"patch_embed": 2 * n * (p * p * in_channels) * d, **{k: depth * v for k, v in per_layer.items()}, "head": head}
    out = {k: out[k] for k in PARTS}
    out["total"] = sum(out.values())
    return out


def model_flops(model_or_name: nn.Module | str, **overrides) -> dict[str, int]:
    """vit_flops of a built VisionTransformer (its config) or of a name such as 'ViT-B/16' (create_model's defaults:
    224x224 RGB, 1000 classes; keyword overrides such as image_size=384 win)."""
    if isinstance(model_or_name, str):
        config = {"image_size": 224, "in_channels": 3, "num_classes": 1000, **parse_name(model_or_name)}
    else:
        config = getattr(model_or_name, "config", None)
        if config is None:
            raise TypeError(f"expected a vitlib VisionTransformer (with .config) or a model name, got {type(model_or_name).__name__}.")
    return vit_flops(**{**config, **overrides})


def attention_share(flops: dict[str, int]) -> float:
    """Fraction of the total that is quadratic in N (attention logits and A v)."""
    return sum(flops[k] for k in QUADRATIC) / flops["total"]
