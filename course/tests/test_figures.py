"""course.figures: the mosaic of E_pos similarities (Fig. 7, center), the attention distances per head (Fig. 7,
right) and E's principal components (Fig. 7, left) as the notebooks draw them."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course.figures import (  # noqa: E402
    plot_attention_distance,
    plot_embedding_filters,
    plot_position_similarity,
    similarity_mosaic,
)
from vitlib import create_model  # noqa: E402
from vitlib.analysis.attention import mean_attention_distance  # noqa: E402
from vitlib.analysis.embeddings import position_similarity  # noqa: E402
from vitlib.model import SinCosPosition2D  # noqa: E402


def teardown_function():
    plt.close("all")


@pytest.fixture
def vit():
    """Three layers of two heads on 16x16 RGB images in 4x4 patches."""
    return create_model("ViT-Micro/4", num_classes=5, image_size=16, in_channels=3, depth=3, heads=2).eval()


def test_attention_distance_plot_has_a_dot_per_head_and_layer(vit):
    dist = mean_attention_distance(vit.attention_maps(torch.randn(2, 3, 16, 16)), vit)
    ax = plot_attention_distance(dist, image_size=16)
    assert len(ax.collections[0].get_offsets()) == 6


def test_embedding_filters_figure_shows_each_component(vit):
    fig = plot_embedding_filters(vit, k=5, cols=5)
    assert sum(len(ax.images) for ax in fig.axes) == 5


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
    pe = SinCosPosition2D(grid=(3, 4), dim=16)()  # E_pos (1, 1 + 12, 16)
    ax = plot_position_similarity(pe, (3, 4), title="sincos2d")
    assert len(ax.images) == 1
    shown = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    np.testing.assert_allclose(shown, similarity_mosaic(position_similarity(pe, (3, 4))), equal_nan=True)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3"]
    assert ax.get_title() == "sincos2d" and ax.images[0].get_clim() == (-1, 1)
    assert len(ax.figure.axes) == 2  # the plot and its colorbar
    ax = plot_position_similarity(pe, (3, 4), vmin=None, vmax=None, colorbar=False)  # the scale fitted to the data
    low, high = ax.images[0].get_clim()
    sim = position_similarity(pe, (3, 4))
    assert low == pytest.approx(sim.min().item()) and high == pytest.approx(sim.max().item())
