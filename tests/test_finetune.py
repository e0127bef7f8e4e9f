"""Fine-tuning (section 3.2): a zero-initialised D x K head, and E_pos carried to a higher resolution in 2D."""

import pytest
import torch

from vitlib import create_model
from vitlib.analysis.finetune import POS_INTERPOLATIONS, fresh_pos_embed, prepare_for_finetuning, resample_pos_embed_1d
from vitlib.data import get_dataset, resize_dataset, stratified_indices, with_train


def pretrained(image_size=16, patch=4, **kw):
    torch.manual_seed(0)
    model = create_model(
        f"ViT-Micro/{patch}", num_classes=7, image_size=image_size, in_channels=1, depth=1, head_hidden=64, **kw
    )
    with torch.no_grad():  # make the pre-training head and E_pos non-trivial
        for p in model.head.parameters():
            p.normal_()
    return model


def test_the_mlp_head_becomes_a_zero_initialised_linear_head_with_zero_logits():
    model = pretrained()
    assert model(torch.randn(2, 1, 16, 16)).abs().sum() > 0
    ft = prepare_for_finetuning(model, num_classes=10)
    assert isinstance(ft.pre_logits, torch.nn.Identity)
    assert tuple(ft.head.weight.shape) == (10, 64)
    assert torch.equal(ft(torch.randn(3, 1, 16, 16)), torch.zeros(3, 10))
    assert ft.config.num_classes == 10 and ft.config.head_hidden is None
    assert (
        isinstance(model.pre_logits, torch.nn.Sequential) and model.config.num_classes == 7
    )  # the pre-trained model is untouched


@pytest.mark.parametrize("pos_interp", POS_INTERPOLATIONS)
def test_higher_resolution_keeps_P_and_grows_the_sequence(pos_interp):
    model = pretrained()
    ft = prepare_for_finetuning(model, 10, image_size=28, pos_interp=pos_interp)
    assert ft.patch_embed.patch_size == 4 and ft.num_patches == 49 and ft.patch_embed.grid == (7, 7)
    assert ft.pos_embed.shape == (1, 50, 64)
    assert torch.equal(ft.pos_embed[:, :1], model.pos_embed[:, :1])  # the [class] row is kept
    assert torch.equal(ft(torch.randn(2, 1, 28, 28)), torch.zeros(2, 10))
    assert model.image_size == (16, 16) and model.pos_embed.shape == (1, 17, 64)
    for name, p in ft.named_parameters():  # everything but E_pos and the head is the pre-trained weight
        if not name.startswith(("pos_embed", "head", "pre_logits")):
            assert torch.equal(p, dict(model.named_parameters())[name]), name


def linear_pos_embed(grid, slopes=(2.0, -3.0), offset=0.5):
    """E_pos whose feature 0 is a linear function of the patch centre's location (row, col) and feature 1 another."""
    r, c = torch.meshgrid(torch.arange(grid[0]).float(), torch.arange(grid[1]).float(), indexing="ij")
    return r, c, lambda r, c: torch.stack([slopes[0] * r + slopes[1] * c + offset, -r + 0.25 * c], dim=-1)


@pytest.mark.parametrize("old,new", [((4, 4), (7, 7)), ((3, 5), (6, 8))])
def test_2d_interpolation_of_a_linear_E_pos_stays_linear_in_the_original_image(old, new):
    """Bilinear: every new patch whose centre lies between old patch centres gets exactly the linear function's value
    at its location in the original image (section 3.2); at the border the values are clamped (no extrapolation)."""
    r, c, f = linear_pos_embed(old)
    model = create_model(
        "ViT-Micro/4", num_classes=3, image_size=(old[0] * 4, old[1] * 4), in_channels=1, dim=8, heads=2, depth=1
    )
    with torch.no_grad():
        model.pos_embed.zero_()
        model.pos_embed[0, 1:, :2] = f(r, c).reshape(-1, 2)
    ft = prepare_for_finetuning(model, 3, image_size=(new[0] * 4, new[1] * 4), mode="bilinear")
    out = ft.pos_embed[0, 1:, :2].reshape(*new, 2)
    # the centre of new patch j lies at (j + 0.5) / new of the image = old patch coordinate (j + 0.5) * old / new - 0.5
    rows = (torch.arange(new[0]) + 0.5) * old[0] / new[0] - 0.5
    cols = (torch.arange(new[1]) + 0.5) * old[1] / new[1] - 0.5
    R, C = torch.meshgrid(rows, cols, indexing="ij")
    inside = (R >= 0) & (R <= old[0] - 1) & (C >= 0) & (C <= old[1] - 1)
    assert inside.sum() >= (new[0] - 2) * (new[1] - 2)
    assert torch.allclose(out[inside], f(R, C)[inside], atol=1e-5)
    # and the rest of E_pos (all zeros) stays zero
    assert torch.equal(ft.pos_embed[0, 1:, 2:], torch.zeros(new[0] * new[1], 6))


def test_2d_bicubic_keeps_the_order_of_a_linear_E_pos():
    r, c, f = linear_pos_embed((4, 4), slopes=(1.0, 0.0), offset=0.0)  # feature 0 = the row
    emb = torch.cat([torch.zeros(1, 2), f(r, c).reshape(-1, 2)])[None]
    model = pretrained()
    with torch.no_grad():
        model.pos_embed.zero_()
        model.pos_embed[..., :2] = emb
    out = prepare_for_finetuning(model, 3, image_size=28).pos_embed[0, 1:, 0].reshape(7, 7)
    assert torch.allclose(out, out[:, :1].expand(7, 7), atol=1e-6)  # constant along each row
    assert (out[1:, 0] > out[:-1, 0]).all()  # increasing down the rows


def test_1d_baseline_stretches_the_flattened_sequence():
    emb = torch.arange(5.0).reshape(1, 5, 1).expand(1, 5, 3)  # prefix row 0, then patches 1..4
    out = resample_pos_embed_1d(emb, 8)
    assert out.shape == (1, 9, 3) and torch.equal(out[:, 0], emb[:, 0])
    assert (out[0, 2:, 0] >= out[0, 1:-1, 0]).all() and out[0, 1, 0] == 1 and out[0, -1, 0] == 4
    assert resample_pos_embed_1d(emb, 4) is emb
    with pytest.raises(ValueError, match="at least 1"):
        resample_pos_embed_1d(emb, 0)


def test_fresh_baseline_is_seeded_and_keeps_the_class_row():
    emb = torch.randn(1, 17, 8)
    a = fresh_pos_embed(emb, 49, generator=torch.Generator().manual_seed(0))
    b = fresh_pos_embed(emb, 49, generator=torch.Generator().manual_seed(0))
    assert a.shape == (1, 50, 8) and torch.equal(a, b) and torch.equal(a[:, 0], emb[:, 0])
    assert a[0, 1:].std() < 0.05


def test_bad_sizes_and_options_raise_clear_errors():
    model = pretrained()
    with pytest.raises(ValueError, match="multiples"):
        prepare_for_finetuning(model, 10, image_size=30)  # 30 is not a multiple of P=4
    with pytest.raises(ValueError, match="positive int"):
        prepare_for_finetuning(model, 10, image_size=(0, 16))
    with pytest.raises(ValueError, match="num_classes"):
        prepare_for_finetuning(model, 0)
    with pytest.raises(ValueError, match="unknown pos_interp"):
        prepare_for_finetuning(model, 10, image_size=28, pos_interp="3d")
    with pytest.raises(ValueError, match="unknown interpolation mode"):
        prepare_for_finetuning(model, 10, image_size=28, mode="cubic")
    with pytest.raises(ValueError, match="use pos_interp='2d'"):
        prepare_for_finetuning(pretrained(pos_embed="sincos2d"), 10, image_size=28, pos_interp="fresh")
    with pytest.raises(TypeError, match="VisionTransformer"):
        prepare_for_finetuning(torch.nn.Linear(2, 2), 10)


def test_other_position_embeddings_follow_the_new_grid():
    for kind in ("sincos2d", "learned2d", "none"):
        ft = prepare_for_finetuning(pretrained(pos_embed=kind), 5, image_size=28)
        assert ft(torch.randn(1, 1, 28, 28)).shape == (1, 5)


def test_data_helpers():
    data = get_dataset("fashion-mnist-mini")
    small = resize_dataset(with_train(data, stratified_indices(data.train.labels, 100, seed=1), val=50), 16)
    assert small.image_size == 16 and small.train.images.shape[1:] == (1, 16, 16) and len(small.train) == 100
    assert len(small.val) == 50 and small.test.images.shape[-1] == 16 and len(small.test) == len(data.test)
