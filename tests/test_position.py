"""The [class] token, the position embeddings E_pos of eq. (1) and appendix D.4, and their 2D resampling
(section 3.2)."""

import pytest
import torch

from vitlib import VisionTransformer, resample_pos_embed
from vitlib.model import POS_EMBED_KINDS, LearnedPosition2D, SinCosPosition2D, sincos_2d


def test_eq_1_prepends_the_class_token_and_adds_e_pos(small_vit):
    model = small_vit()
    with torch.no_grad():
        model.cls_token.normal_()
    x = torch.randn(3, model.num_patches, 32)  # x_p E
    z0 = model.embed(x)
    assert z0.shape == (3, 1 + model.num_patches, 32)
    assert torch.equal(z0, torch.cat([model.cls_token.expand(3, -1, -1), x], dim=1) + model.pos_embed)


def test_without_a_class_token_eq_1_adds_e_pos_to_the_patches(small_vit):
    model = small_vit(pool="gap")
    x = torch.randn(2, model.num_patches, 32)
    assert model.cls_token is None and torch.equal(model.embed(x), x + model.pos_embed)


@pytest.mark.parametrize("kind", POS_EMBED_KINDS)
def test_every_kind_trains_in_a_small_model(kind, small_vit):
    model = small_vit(pos_embed=kind)
    logits = model(torch.randn(2, 1, 28, 28))
    assert logits.shape == (2, 5)
    logits.square().sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    pos_params = [n for n, _ in model.named_parameters() if n.startswith("pos_embed") or "rel_pos" in n]
    expected = {
        "learned": ["pos_embed"],  # timm's name
        "none": [],
        "sincos2d": [],
        "learned2d": ["pos_embed_2d.rows", "pos_embed_2d.cols", "pos_embed_2d.prefix"],
        "relative": [f"blocks.{i}.attn.rel_pos.table" for i in range(2)],
    }[kind]
    assert sorted(pos_params) == sorted(expected)


@pytest.mark.parametrize("kind", ["none", "relative"])
def test_none_and_relative_add_nothing_to_the_tokens(kind, small_vit):
    model = small_vit(pos_embed=kind)
    x = torch.randn(2, model.num_patches, 32)
    assert model.position_embedding() is None
    assert torch.equal(model.embed(x)[:, 1:], x)


def test_learned_is_one_parameter_per_token(small_vit):
    model = small_vit()
    assert model.pos_embed.shape == (1, 1 + 49, 32) and model.position_embedding() is model.pos_embed


def test_learned2d_concatenates_a_row_and_a_column_embedding():
    gh, gw, dim = 3, 4, 8  # not square, so rows and columns cannot be confused
    pe = LearnedPosition2D(grid=(gh, gw), dim=dim)
    emb = pe()
    assert emb.shape == (1, 1 + gh * gw, dim)
    grid = emb[0, 1:].reshape(gh, gw, dim)
    y_half, x_half = grid[..., : dim // 2], grid[..., dim // 2 :]
    assert torch.equal(y_half, y_half[:, :1].expand(gh, gw, -1))  # same row -> same first D/2 features
    assert torch.equal(x_half, x_half[:1].expand(gh, gw, -1))  # same column -> same last D/2 features
    assert not torch.equal(y_half[0], y_half[1]) and not torch.equal(x_half[:, 0], x_half[:, 1])
    assert torch.equal(emb[0, 0], pe.prefix[0, 0])
    with pytest.raises(ValueError, match="even"):
        LearnedPosition2D(grid=(2, 2), dim=7)


def test_sincos2d_is_fixed_and_two_dimensional():
    gh, gw, dim = 3, 4, 16
    pe = SinCosPosition2D(grid=(gh, gw), dim=dim)
    assert list(pe.parameters()) == [] and pe.state_dict() == {}
    emb = pe()
    assert emb.shape == (1, 1 + gh * gw, dim)
    assert torch.equal(emb[0, 0], torch.zeros(dim))  # nothing added to the [class] token
    assert torch.equal(emb[0, 1:], sincos_2d((gh, gw), dim))
    assert torch.equal(SinCosPosition2D(grid=(gh, gw), dim=dim)(), emb)  # not random
    q = dim // 4
    torch.testing.assert_close(emb[0, 1], torch.tensor([0.0] * q + [1.0] * q + [0.0] * q + [1.0] * q))  # (0, 0)
    grid = emb[0, 1:].reshape(gh, gw, dim)
    assert torch.equal(grid[..., : dim // 2], grid[:, :1, : dim // 2].expand(gh, gw, -1))  # sin/cos(y): per row
    assert torch.equal(grid[..., dim // 2 :], grid[:1, :, dim // 2 :].expand(gh, gw, -1))  # sin/cos(x): per column
    torch.testing.assert_close(grid[2, 1, :q], torch.sin(2 * 10000.0 ** (-torch.arange(q) / q)))
    with pytest.raises(ValueError, match="divisible by 4"):
        sincos_2d((2, 2), 6)


def test_unknown_kind_is_an_error_listing_the_kinds():
    with pytest.raises(ValueError, match="rope") as err:
        VisionTransformer(pos_embed="rope")
    assert all(kind in str(err.value) for kind in POS_EMBED_KINDS)


@pytest.mark.parametrize("options", [dict(pos_embed="learned2d"), dict(norm_first=False), dict(pos_embed="relative")])
def test_the_papers_vit_refuses_a_variant_by_name(options):
    with pytest.raises(ValueError, match="variant.*build_vit"):
        VisionTransformer(**options)


class TestResample:
    def test_same_grid_is_unchanged(self):
        pos = torch.randn(1, 1 + 16, 8)
        assert torch.equal(resample_pos_embed(pos, (4, 4)), pos)

    @pytest.mark.parametrize("old, new", [((4, 4), (6, 6)), ((4, 4), (2, 3)), ((2, 5), (4, 10))])
    def test_new_grid_shape_and_class_token_kept(self, old, new):
        pos = torch.randn(1, 1 + old[0] * old[1], 8)
        out = resample_pos_embed(pos, new, old_grid=old)
        assert out.shape == (1, 1 + new[0] * new[1], 8)
        assert torch.equal(out[:, 0], pos[:, 0])

    @pytest.mark.parametrize("mode", ["bicubic", "bilinear"])
    def test_constant_embedding_stays_constant(self, mode):
        pos = torch.cat([torch.zeros(1, 1, 8), torch.full((1, 16, 8), 0.7)], dim=1)
        out = resample_pos_embed(pos, (7, 7), mode=mode)
        torch.testing.assert_close(out[:, 1:], torch.full((1, 49, 8), 0.7))

    def test_interpolation_is_two_dimensional(self):
        """An embedding that depends on the row only keeps doing so: the grid is reshaped row-major, not transposed."""
        old, new = (2, 5), (4, 10)
        rows = torch.randn(old[0], 1, 8).expand(*old, 8)
        pos = torch.cat([torch.randn(1, 1, 8), rows.reshape(1, -1, 8)], dim=1)
        grid = resample_pos_embed(pos, new, old_grid=old)[0, 1:].reshape(*new, 8)
        torch.testing.assert_close(grid, grid[:, :1].expand(*new, 8))

    def test_grid_errors(self):
        with pytest.raises(ValueError, match="not a square grid"):
            resample_pos_embed(torch.randn(1, 1 + 10, 8), (4, 4))
        with pytest.raises(ValueError, match="old_grid"):
            resample_pos_embed(torch.randn(1, 1 + 10, 8), (4, 4), old_grid=(3, 3))


@pytest.mark.parametrize("size, grid", [(56, (14, 14)), ((28, 56), (7, 14))])
@pytest.mark.parametrize("kind", POS_EMBED_KINDS)
def test_set_image_size_fine_tunes_at_another_resolution(kind, size, grid, small_vit):
    model = small_vit(pos_embed=kind).eval()  # built for 28x28, P=4: a 7x7 grid
    h, w = (size, size) if isinstance(size, int) else size
    before = model.position_embedding()
    model.set_image_size(size)
    assert model.num_patches == grid[0] * grid[1] and model.image_size == (h, w)
    after = model.position_embedding()
    if before is not None:
        assert after.shape == (1, 1 + grid[0] * grid[1], 32)
        assert torch.equal(after[:, 0], before[:, 0])  # the [class] token's position is kept
    logits = model(torch.randn(2, 1, h, w))
    assert logits.shape == (2, 5) and torch.isfinite(logits).all()
    with pytest.raises(ValueError, match=rf"{h}x{w}.*28x28"):
        model(torch.randn(2, 1, 28, 28))
    with pytest.raises(ValueError, match="does not divide"):
        model.set_image_size(30)


# ----------------------------------------------------------------------------- resizing, number by number
def linear_by_hand(table: torch.Tensor, size: int) -> torch.Tensor:
    """Rows of `table` (n, C) resampled to `size` rows as an image axis of n cells stretched to `size` (the cells'
    centres line up, align_corners=False): new row i reads old coordinate (i + 0.5) n / size - 0.5, clamped to the
    ends, and mixes the two old rows around it in proportion."""
    n, out = len(table), []
    for i in range(size):
        x = min(max((i + 0.5) * n / size - 0.5, 0.0), n - 1.0)
        lo = int(x)
        hi, t = min(lo + 1, n - 1), x - lo
        out.append((1 - t) * table[lo] + t * table[hi])
    return torch.stack(out)


@pytest.mark.parametrize("old, new", [((3, 4), (6, 8)), ((4, 4), (7, 5)), ((5, 3), (2, 3))])
def test_learned2d_resize_interpolates_each_axis_by_hand(old, new):
    pe = LearnedPosition2D(grid=old, dim=8)
    rows, cols, prefix = pe.rows.clone(), pe.cols.clone(), pe.prefix.clone()
    pe.resize(new)
    torch.testing.assert_close(pe.rows, linear_by_hand(rows, new[0]))
    torch.testing.assert_close(pe.cols, linear_by_hand(cols, new[1]))
    grid = pe()[0, 1:].reshape(*new, 8)
    for r, c in [(0, 0), (new[0] - 1, 0), (1, new[1] - 1), (new[0] // 2, new[1] // 2)]:
        assert torch.equal(grid[r, c], torch.cat([pe.rows[r], pe.cols[c]]))  # [Y-embedding of r | X-embedding of c]
    assert torch.equal(pe()[:, :1], prefix) and pe.grid == new
    assert torch.equal(linear_by_hand(rows, 2 * old[0])[1], 0.75 * rows[0] + 0.25 * rows[1])  # the rule, by hand


def offsets_read_after_resize(small_vit, image_size, **options):
    """Fill every layer's relative table with its own offsets (row k of 2L - 1 holds k - (L - 1)), resize the model to
    `image_size`, and return new offset -> the old offset its row was read from (linear interpolation of a linear
    table is exact), with the new grid."""
    model = small_vit(pos_embed="relative", **options)
    for block in model.blocks:
        rel = block.attn.rel_pos
        with torch.no_grad():
            rel.table.copy_((torch.arange(len(rel.table)) - (rel.num_tokens - 1.0))[:, None].expand_as(rel.table))
    model.set_image_size(image_size)
    rel = model.blocks[0].attn.rel_pos
    assert rel.num_tokens == model.num_patches + model.num_prefix_tokens and rel.offsets.shape == (rel.num_tokens,) * 2
    return (lambda offset: rel.table[offset + rel.num_tokens - 1, 0].item()), model.patch_embed.grid


def test_relative_resize_to_a_wider_grid_keeps_whole_rows(small_vit):
    """7x7 -> 7x14 patches: the token one row below is 7 places further in the sequence before and 14 after; the
    rows do not change, so the new offset 14 dr reads the old 7 dr, and a column step is half an old one."""
    read, grid = offsets_read_after_resize(small_vit, (28, 56))
    assert grid == (7, 14)
    for dr in range(-6, 7):
        assert read(14 * dr) == pytest.approx(7 * dr, abs=1e-5)
    for dc in (1, 2, 5, -3):
        assert read(dc) == pytest.approx(dc / 2, abs=1e-5)


@pytest.mark.parametrize(
    "image_size, options, expected",
    [
        ((28, 56), {"pool": "gap"}, {14: 7.0, 28: 14.0, 1: 0.5}),  # wider, no [class] token: rows kept, columns / 2
        ((56, 28), {}, {1: 1.0, 3: 3.0, 14: 7.0}),  # taller: columns kept, two new rows are one old row
        (56, {}, {2: 1.0, 28: 7.0}),  # 14x14: columns / 2, two new rows are one old row
    ],
    ids=["wider-gap", "taller", "both"],
)
def test_relative_resize_keeps_rows_and_columns_apart(small_vit, image_size, options, expected):
    """Before the fix, RelativePosition.resize stretched the flattened table by (L - 1)/(L' - 1) for every offset:
    without a [class] token the row step 14 read 6.93 instead of 7; 7x7 -> 14x7 made a column step read 0.5."""
    read, _ = offsets_read_after_resize(small_vit, image_size, **options)
    assert {offset: round(read(offset), 4) for offset in expected} == expected


# ----------------------------------------------------------------------------- against timm's own functions
@pytest.mark.parametrize("old, new", [((7, 7), (14, 14)), ((4, 6), (8, 9)), ((7, 7), (10, 10)), ((2, 3), (5, 5))])
@pytest.mark.parametrize("prefix", [0, 1])
def test_resampling_equals_timms(old, new, prefix):
    """resample_pos_embed against timm.layers.resample_abs_pos_embed: bicubic, the prefix rows kept apart (growing
    grids: timm's antialiasing only acts when shrinking)."""
    from timm.layers import resample_abs_pos_embed

    pos = torch.randn(1, prefix + old[0] * old[1], 12)
    theirs = resample_abs_pos_embed(pos, list(new), list(old), num_prefix_tokens=prefix, antialias=False)
    assert torch.allclose(resample_pos_embed(pos, new, old, prefix), theirs, atol=1e-6)


def test_sincos_2d_equals_timms_with_the_channels_in_another_order():
    """sincos_2d against timm's build_sincos2d_pos_embed: the same frequencies and coordinates; vitlib orders the
    channels [sin y | cos y | sin x | cos x], timm [sin y | sin x | cos y | cos x] (D/4 each)."""
    from timm.layers.pos_embed_sincos import build_sincos2d_pos_embed

    grid, dim = (3, 5), 24
    q = dim // 4
    theirs = build_sincos2d_pos_embed(list(grid), dim)
    reordered = torch.cat([theirs[:, :q], theirs[:, 2 * q : 3 * q], theirs[:, q : 2 * q], theirs[:, 3 * q :]], dim=1)
    assert torch.allclose(sincos_2d(grid, dim), reordered, atol=1e-6)


@pytest.mark.parametrize("options", [{}, {"pool": "gap"}])
def test_relative_resize_to_the_same_grid_keeps_the_table(small_vit, options):
    model = small_vit(pos_embed="relative", **options)
    before = [block.attn.rel_pos.table.clone() for block in model.blocks]
    model.set_image_size(28)
    assert all(torch.equal(b, block.attn.rel_pos.table) for b, block in zip(before, model.blocks))
