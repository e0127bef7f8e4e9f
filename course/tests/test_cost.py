"""course.cost: parameter counts without weights, equal-parameter depth/width pairs."""

import pytest

from course.cost import depth_width_pair, parameter_count, width_for_parameters
from vitlib import VisionTransformer, count_parameters, parse_name
from vitlib.analysis.cost import vit_flops

BASE = dict(image_size=28, patch_size=7, in_channels=1, num_classes=10)


def by_hand(dim, depth, heads, mlp_dim, patch_size, image_size=224, in_channels=3, num_classes=1000, **options) -> int:
    """The parameters of a ViT (eq. 1-4) summed by hand: patch projection E and its bias, [class], E_pos, per layer
    LN (2D) + W_qkv (3D^2 + 3D) + W_o (D^2 + D) + LN (2D) + MLP (2 D M + M + D), the final LN, the head."""
    pos, pool, hidden = options.get("pos_embed", "learned"), options.get("pool", "cls"), options.get("head_hidden")
    gh, gw = (image_size // patch_size,) * 2
    prefix = 1 if pool == "cls" else 0
    tokens = prefix + gh * gw
    count = patch_size**2 * in_channels * dim + dim + prefix * dim
    count += {"learned": tokens * dim, "sincos2d": 0, "none": 0, "learned2d": (gh + gw) * dim // 2 + prefix * dim}.get(
        pos,
        depth * (2 * tokens - 1) * (dim // heads),  # "relative": one table of 2L - 1 offsets per layer
    )
    count += depth * (4 * dim * dim + 2 * dim * mlp_dim + 9 * dim + mlp_dim) + 2 * dim
    count += (dim * hidden + hidden + hidden * num_classes + num_classes) if hidden else dim * num_classes + num_classes
    return count


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"pos_embed": "sincos2d"},
        {"pos_embed": "learned2d"},
        {"pos_embed": "none"},
        {"pos_embed": "relative"},
        {"pool": "gap"},
        {"patch_size": 4, "dim": 32, "depth": 3, "mlp_dim": 80},
        {"head_hidden": 16},
    ],
)
def test_parameter_count_equals_the_sum_by_hand(overrides):
    config = {**BASE, "dim": 64, "depth": 4, "heads": 4, "mlp_dim": 128, **overrides}
    assert parameter_count(**config) == by_hand(**config)


# Table 1's variants at 224 px with 1000 classes: the exact counts of torchvision's vit_b_16 ... vit_h_14 (and timm's
# vit_*_224), and Table 1's rounded "Params" column for the /16 and /14 models (Base 86M, Large 307M, Huge 632M)
TABLE_1 = [
    ("ViT-B/16", dict(dim=768, depth=12, heads=12, mlp_dim=3072, patch_size=16), 86_567_656, 86e6),
    ("ViT-B/32", dict(dim=768, depth=12, heads=12, mlp_dim=3072, patch_size=32), 88_224_232, None),
    ("ViT-L/16", dict(dim=1024, depth=24, heads=16, mlp_dim=4096, patch_size=16), 304_326_632, 307e6),
    ("ViT-L/32", dict(dim=1024, depth=24, heads=16, mlp_dim=4096, patch_size=32), 306_535_400, None),
    ("ViT-H/14", dict(dim=1280, depth=32, heads=16, mlp_dim=5120, patch_size=14), 632_045_800, 632e6),
]


@pytest.mark.parametrize("name, sizes, exact, table", TABLE_1, ids=[t[0] for t in TABLE_1])
def test_parameter_count_of_table_1_without_allocating(name, sizes, exact, table):
    assert parameter_count(**sizes) == exact == by_hand(**sizes)  # built on the meta device, so instantly
    assert parse_name(name) == sizes  # Table 1's layers, width, MLP size and heads
    if table:  # the paper rounds (and may count at another resolution or head): within 1%
        assert abs(exact / table - 1) < 0.01


def test_parameter_count_takes_mlp_ratio_or_mlp_dim():
    assert parameter_count(**BASE, dim=64, depth=4, heads=4, mlp_ratio=2) == by_hand(
        **BASE, dim=64, depth=4, heads=4, mlp_dim=128
    )
    with pytest.raises(ValueError, match="not both"):
        parameter_count(**BASE, dim=64, depth=4, heads=4, mlp_ratio=2, mlp_dim=128)


def test_width_for_parameters_is_the_closest_multiple_of_heads():
    target = parameter_count(**BASE, dim=64, depth=4, heads=4, mlp_ratio=2)
    assert width_for_parameters(target, depth=4, heads=4, mlp_ratio=2, **BASE) == 64
    dim = width_for_parameters(target, depth=2, heads=4, mlp_ratio=2, **BASE)
    assert dim % 4 == 0
    gaps = {
        d: abs(parameter_count(**BASE, dim=d, depth=2, heads=4, mlp_ratio=2) - target) for d in (dim - 4, dim, dim + 4)
    }
    assert gaps[dim] == min(gaps.values())
    with pytest.raises(ValueError, match="raise max_dim"):
        width_for_parameters(10 * target, depth=1, heads=4, max_dim=64, **BASE)
    with pytest.raises(ValueError, match="positive"):
        width_for_parameters(0, depth=2, **BASE)


def test_depth_width_pair_has_equal_parameters_and_the_asked_shapes():
    deep, wide = depth_width_pair(dict(dim=48, depth=8, heads=4, mlp_ratio=2), shallow_depth=2, **BASE)
    assert (deep.depth, deep.dim, deep.mlp_dim) == (8, 48, 96)
    assert wide.depth == 2 and wide.dim > deep.dim and wide.mlp_dim == 2 * wide.dim
    n_deep, n_wide = parameter_count(deep), parameter_count(wide)
    assert abs(n_deep - n_wide) / n_deep < 0.05
    assert n_deep == count_parameters(VisionTransformer(deep)) and n_wide == count_parameters(VisionTransformer(wide))
    # same parameters, about the same FLOPs per image: both are ~ depth x 12 D^2 per token
    f_deep, f_wide = vit_flops(deep)["total"], vit_flops(wide)["total"]
    assert 0.8 < f_deep / f_wide < 1.25
    # mlp_dim in `deep` sets the ratio too
    deep2, wide2 = depth_width_pair(dict(dim=48, depth=8, heads=4, mlp_dim=192), shallow_depth=2, **BASE)
    assert deep2.mlp_dim == 192 and wide2.mlp_dim == 4 * wide2.dim


def test_depth_width_pair_errors():
    with pytest.raises(ValueError, match="shallow_depth"):
        depth_width_pair(dict(dim=48, depth=4), shallow_depth=4, **BASE)
    with pytest.raises(ValueError, match="needs at least dim and depth"):
        depth_width_pair(dict(dim=48), shallow_depth=2, **BASE)
    with pytest.raises(ValueError, match="tolerance"):  # 64 heads: widths jump in steps of 64, too coarse to match
        depth_width_pair(dict(dim=64, depth=3, heads=64, mlp_ratio=2), shallow_depth=1, tolerance=0.001, **BASE)
