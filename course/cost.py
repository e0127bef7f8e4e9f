"""Parameters counted without allocating them, and pairs of deep-narrow and shallow-wide ViTs with equal parameters
(appendix D.2, Fig. 8): notebook 10's sizes. FLOPs are `vitlib.analysis.cost`'s."""

from __future__ import annotations

import torch

from vitlib.model import ViTConfig, build_vit, count_parameters


def vit_config(**options) -> ViTConfig:
    """A ViTConfig of options, where mlp_ratio=r may stand for mlp_dim = r * dim."""
    ratio = options.pop("mlp_ratio", None)
    if ratio is not None:
        if "mlp_dim" in options:
            raise ValueError("give mlp_dim or mlp_ratio, not both.")
        options["mlp_dim"] = int(round(ratio * options["dim"]))
    return ViTConfig(**options)


def parameter_count(config: ViTConfig | None = None, **options) -> int:
    """Parameters of build_vit(config) (or of `vit_config(**options)`), counted on the meta device (no weights)."""
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
