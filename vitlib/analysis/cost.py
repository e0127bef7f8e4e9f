"""What a ViT costs: forward FLOPs per image, counted from its `ViTConfig` (Table 1 sizes, any patch size; a
hybrid's CNN stem measured), parameters counted without allocating them, sequence lengths, and pairs of deep-narrow
and shallow-wide models with equal parameters (appendix D.2, Fig. 8).

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

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ..model import (
    HybridEmbedding,
    VisionTransformer,
    ViTConfig,
    build_vit,
    check_patch_size,
    count_parameters,
    parse_name,
)
from ..utils import pair

PARTS = ("patch_embed", "qkv", "attn_logits", "attn_values", "attn_proj", "mlp", "head")
QUADRATIC = ("attn_logits", "attn_values")  # the parts that grow with N^2


# ------------------------------------------------------------------------------------------------------- FLOPs
def vit_flops(config: ViTConfig, visible: int | None = None) -> dict[str, int]:
    """FLOPs of one forward pass of one image of a plain ViT, per part (see PARTS) and in 'total'. The number of
    heads does not change the count: the heads split D, they do not multiply the work.

    `visible`: how many patch tokens the encoder's blocks see (default: all N). MAE's encoder (and any keep-mask)
    sees a sequence of `visible` patches plus the [class] token, whatever their positions in the grid; the patch
    embedding is still counted over all N patches, since vitlib's MAE embeds every patch before it keeps some."""
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
    """Forward FLOPs per image of a built VisionTransformer, a ViTConfig or a name such as 'ViT-B/16' (create_model's
    defaults: 224x224 RGB, 1000 classes), keyword overrides (image_size=384, ...) applied to its config. A built
    hybrid gets a 'stem' entry (its CNN, measured) in the total; a plain ViT 'stem' 0."""
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
    """FLOPs of a CNN on one image -- a hybrid's stem, or a whole CNN baseline such as a small ResNet -- measured with
    FlopCounterMode (convolutions and matrix multiplications, 2 per multiply-add; batch norm and ReLU left out)."""
    h, w = pair(image_size, "image_size")
    was_training = backbone.training
    x = torch.zeros(1, in_channels, h, w, device=next(backbone.parameters()).device)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        backbone.eval()(x)
    backbone.train(was_training)
    return int(counter.get_total_flops())


def hybrid_flops(model: VisionTransformer) -> dict[str, int]:
    """A hybrid counted as what section 3.1 says it is: the CNN (measured), then a plain ViT whose input "image" is
    the feature map (C' channels, H/S x W/S) cut into patches of size 1x1, so its patch embedding costs 2 N C' D."""
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
    """N = HW / P^2 patches (section 3.1), plus one when the [class] token is counted; a clear error when P does not
    divide the image."""
    gh, gw = check_patch_size(image_size, patch_size)
    return gh * gw + (1 if class_token else 0)


def vit_config(**options) -> ViTConfig:
    """A ViTConfig of options, where mlp_ratio=r may stand for mlp_dim = r * dim."""
    ratio = options.pop("mlp_ratio", None)
    if ratio is not None:
        if "mlp_dim" in options:
            raise ValueError("give mlp_dim or mlp_ratio, not both.")
        options["mlp_dim"] = int(round(ratio * options["dim"]))
    return ViTConfig(**options)


def parameter_count(config: ViTConfig | None = None, **options) -> int:
    """Parameters of build_vit(config) (or of `vit_config(**options)`), counted without allocating its weights (built
    on the meta device)."""
    config = config or vit_config(**options)
    with torch.device("meta"):
        return count_parameters(build_vit(config))


def width_for_parameters(
    target: int, depth: int, heads: int = 4, mlp_ratio: float = 2.0, max_dim: int = 4096, **shared
) -> int:
    """The width D (a multiple of `heads`, MLP size mlp_ratio * D) whose ViT of `depth` layers has the parameter count
    closest to `target`; the other sizes (image_size, patch_size, ...) come from `shared`."""
    if target < 1 or depth < 1 or heads < 1:
        raise ValueError(
            f"target, depth and heads must be positive, got target={target}, depth={depth}, heads={heads}."
        )
    best, best_gap = heads, None
    for dim in range(heads, max_dim + 1, heads):
        n = parameter_count(**shared, dim=dim, depth=depth, heads=heads, mlp_ratio=mlp_ratio)
        if best_gap is None or abs(n - target) < best_gap:
            best, best_gap = dim, abs(n - target)
        if n >= target:  # the count grows with D: past the target nothing gets closer
            return best
    raise ValueError(f"no width up to max_dim={max_dim} reaches {target:,} parameters at depth {depth}: raise max_dim.")


def depth_width_pair(deep: dict, shallow_depth: int, tolerance: float = 0.05, **shared) -> tuple[ViTConfig, ViTConfig]:
    """A deep-narrow and a shallow-wide ViT with (nearly) the same number of parameters (Appendix D.2, Fig. 8).

    `deep` gives the deep model's dim, depth, heads and mlp_ratio (or mlp_dim); the shallow model keeps its heads and
    MLP ratio and gets `shallow_depth` layers and the width that matches the deep model's parameter count. `shared`
    holds what both share (image_size, patch_size, in_channels, num_classes, ...). Raises when the counts differ by
    more than `tolerance`."""
    deep = dict(deep)
    if "dim" not in deep or "depth" not in deep:
        raise ValueError(f"`deep` needs at least dim and depth, got {sorted(deep)}.")
    if not 1 <= shallow_depth < deep["depth"]:
        raise ValueError(
            f"shallow_depth must be at least 1 and below the deep model's depth {deep['depth']}, got {shallow_depth}."
        )
    heads = deep.pop("heads", 4)
    ratio = deep["mlp_dim"] / deep["dim"] if "mlp_dim" in deep else deep.pop("mlp_ratio", 2.0)
    deep_cfg = vit_config(**shared, **deep, heads=heads, **({} if "mlp_dim" in deep else {"mlp_ratio": ratio}))
    target = parameter_count(deep_cfg)
    dim = width_for_parameters(target, shallow_depth, heads=heads, mlp_ratio=ratio, **shared)
    wide_cfg = vit_config(**shared, dim=dim, depth=shallow_depth, heads=heads, mlp_ratio=ratio)
    gap = abs(parameter_count(wide_cfg) - target) / target
    if gap > tolerance:
        raise ValueError(
            f"the closest shallow-wide model differs by {gap:.1%} in parameters (> tolerance "
            f"{tolerance:.0%}); change the sizes or raise tolerance."
        )
    return deep_cfg, wide_cfg
