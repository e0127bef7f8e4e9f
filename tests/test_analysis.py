"""vitlib.studies.embeddings: the position-embedding similarity of Fig. 7 (center), from a model, a module or a
tensor."""

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vitlib import PositionEmbedding, sincos_2d  # noqa: E402
from vitlib.studies.embeddings import (
    patch_position_embeddings,
    plot_position_similarity,
    position_similarity,  # noqa: E402
    similarity_mosaic,
)


def teardown_function():
    plt.close("all")


def test_similarity_is_the_cosine_of_every_pair_in_grid_layout():
    gh, gw, dim = 3, 4, 8  # not square, so rows and columns cannot be confused
    emb = torch.randn(gh * gw, dim)
    sim = position_similarity(emb, (gh, gw))
    assert sim.shape == (gh * gw, gh, gw)
    for i in (0, 5, 11):
        for r in range(gh):
            for c in range(gw):
                expected = F.cosine_similarity(emb[i], emb[r * gw + c], dim=0)
                torch.testing.assert_close(sim[i, r, c], expected, atol=1e-6, rtol=0)
    flat = sim.reshape(gh * gw, gh * gw)
    torch.testing.assert_close(flat, flat.T)
    torch.testing.assert_close(flat.diagonal(), torch.ones(gh * gw))


def test_the_class_embedding_is_left_out_for_tensors_modules_and_models(small_vit):
    model = small_vit(pos_embed="learned")
    weight = model.pos_embed.weight  # (1, 1 + 49, D)
    expected = position_similarity(weight[0, 1:], (7, 7))
    for source in (model, model.pos_embed, weight, weight[0], weight.detach()):
        torch.testing.assert_close(position_similarity(source), expected)
    emb, grid = patch_position_embeddings(model)
    assert grid == (7, 7) and emb.shape == (49, 32) and not emb.requires_grad
    torch.testing.assert_close(position_similarity(weight[0, 1:]), expected)  # a square count: no prefix


def test_fixed_sincos_similarity_depends_only_on_the_offset():
    gh, gw = 5, 6
    sim = position_similarity(sincos_2d((gh, gw), 64), (gh, gw)).reshape(gh, gw, gh, gw)
    torch.testing.assert_close(sim[1:, 1:, 1:, 1:], sim[:-1, :-1, :-1, :-1], atol=1e-5, rtol=0)  # shift both: same
    centre = sim[2, 3]
    assert centre[2, 3] == pytest.approx(1.0) and centre[2, 2] > centre[0, 0]  # a neighbour is closer than a corner


def test_learned2d_shows_rows_and_columns():
    pe = PositionEmbedding(kind="learned2d", grid=(4, 4), dim=512)
    sim = position_similarity(pe).reshape(4, 4, 4, 4)
    assert (sim[1, 2, 1, 0] - 0.5).abs() < 0.15  # same row: the Y half is shared
    assert (sim[1, 2, 3, 2] - 0.5).abs() < 0.15  # same column: the X half is shared
    assert sim[1, 2, 3, 0].abs() < 0.15  # neither


@pytest.mark.parametrize("kind", ["none", "relative"])
def test_kinds_without_embeddings_are_refused(kind):
    with pytest.raises(ValueError, match="add nothing"):
        position_similarity(PositionEmbedding(kind=kind, grid=(2, 2), dim=8))


def test_shapes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="square"):
        position_similarity(torch.randn(7, 4))
    with pytest.raises(ValueError, match="only 5"):
        position_similarity(torch.randn(5, 4), (2, 3))
    with pytest.raises(ValueError, match="one set"):
        position_similarity(torch.randn(2, 5, 4))


def test_mosaic_places_tile_i_at_the_grid_position_of_patch_i():
    gh, gw = 2, 3
    sim = torch.arange(gh * gw * gh * gw, dtype=torch.float64).reshape(gh * gw, gh, gw)
    mosaic = similarity_mosaic(sim, pad=1)
    assert mosaic.shape == (gh * gh + gh - 1, gw * gw + gw - 1)
    assert np.isnan(mosaic).sum() == mosaic.size - sim.numel()
    np.testing.assert_array_equal(mosaic[0:2, 4:7], sim[1].numpy())  # patch 1: row 0, column 1
    np.testing.assert_array_equal(mosaic[3:5, 8:11], sim[5].numpy())  # patch 5: row 1, column 2
    with pytest.raises(ValueError, match="one gh x gw tile"):
        similarity_mosaic(torch.zeros(5, 2, 3))


def test_plot_draws_the_mosaic_with_patch_ticks():
    pe = PositionEmbedding(kind="sincos2d", grid=(3, 4), dim=16)
    ax = plot_position_similarity(pe, title="sincos2d")
    assert len(ax.images) == 1
    shown = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    np.testing.assert_allclose(shown, similarity_mosaic(position_similarity(pe)), equal_nan=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3"]
    assert ax.get_title() == "sincos2d" and ax.images[0].get_clim() == (-1, 1)
    assert len(ax.figure.axes) == 2  # the plot and its colorbar
    ax = plot_position_similarity(pe, vmin=None, vmax=None, colorbar=False)  # the scale fitted to the data
    low, high = ax.images[0].get_clim()
    sim = position_similarity(pe)
    assert low == pytest.approx(sim.min().item()) and high == pytest.approx(sim.max().item())
