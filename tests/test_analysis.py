"""vitlib.analysis.embeddings: the position-embedding similarity of Fig. 7 (center), from a model, a module or a
tensor."""

import matplotlib
import pytest
import torch
import torch.nn.functional as F

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vitlib.analysis.embeddings import patch_position_embeddings, position_similarity  # noqa: E402
from vitlib.model import LearnedPosition2D, sincos_2d  # noqa: E402


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


def test_the_class_embedding_is_left_out_for_tensors_and_models(small_vit):
    model = small_vit(pos_embed="learned")
    weight = model.pos_embed  # (1, 1 + 49, D)
    expected = position_similarity(weight[0, 1:], (7, 7))
    for source in (model, weight, weight[0], weight.detach()):
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


def test_learned2d_shows_rows_and_columns(small_vit):
    pe = LearnedPosition2D(grid=(4, 4), dim=512)
    sim = position_similarity(pe()).reshape(4, 4, 4, 4)
    assert (sim[1, 2, 1, 0] - 0.5).abs() < 0.15  # same row: the Y half is shared
    assert (sim[1, 2, 3, 2] - 0.5).abs() < 0.15  # same column: the X half is shared
    assert sim[1, 2, 3, 0].abs() < 0.15  # neither


@pytest.mark.parametrize("kind", ["none", "relative"])
def test_kinds_without_embeddings_are_refused(kind, small_vit):
    with pytest.raises(ValueError, match="add nothing"):
        position_similarity(small_vit(pos_embed=kind))


def test_shapes_that_do_not_fit_are_refused():
    with pytest.raises(ValueError, match="square"):
        position_similarity(torch.randn(7, 4))
    with pytest.raises(ValueError, match="only 5"):
        position_similarity(torch.randn(5, 4), (2, 3))
    with pytest.raises(ValueError, match="one set"):
        position_similarity(torch.randn(2, 5, 4))
