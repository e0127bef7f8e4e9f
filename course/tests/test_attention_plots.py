"""The attention-map plots (course.plotting) and the timing helpers of the N sweep (course.timing)."""

import math
import timeit

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import vitlib
from course.figures import plot_attention_distance
from course.plotting import (
    cls_attention_grid,
    overlay_colorbar,
    show_attention_matrix,
    show_attention_overlay,
)
from course.timing import attention, attention_cost, attention_weights_bytes, loglog_slope, time_call
from vitlib.analysis.embeddings import patch_distances


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_attention_matrix_shows_the_weights_and_labels():
    weights = torch.rand(5, 5).softmax(-1)
    ax = show_attention_matrix(weights, labels=list("abcde"), title="A")
    assert len(ax.images) == 1
    np.testing.assert_allclose(ax.images[0].get_array(), weights.double().numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcde")
    assert ax.get_title() == "A"


@pytest.mark.parametrize("shape", [(5,), (2, 5, 5), (4, 5)])
def test_attention_matrix_refuses_other_shapes(shape):
    with pytest.raises(ValueError, match="square attention matrix"):
        show_attention_matrix(torch.rand(shape))


def test_attention_matrix_refuses_wrong_label_count():
    with pytest.raises(ValueError, match="labels"):
        show_attention_matrix(torch.eye(3), labels=["a", "b"])


def test_cls_attention_grid_is_row_zero_on_the_grid():
    torch.manual_seed(0)
    weights = torch.rand(2, 3, 1 + 6, 1 + 6).softmax(-1)  # (B, heads, L, L), grid 2x3
    grid = cls_attention_grid(weights, (2, 3))
    assert grid.shape == (2, 3, 2, 3)
    assert torch.equal(grid[1, 2, 1, 0], weights[1, 2, 0, 1 + 3])  # patch (row 1, col 0) is token 1 + 3
    torch.testing.assert_close(grid.sum((-2, -1)) + weights[..., 0, 0], torch.ones(2, 3))


def test_cls_attention_grid_refuses_a_wrong_grid():
    with pytest.raises(ValueError, match="do not fit"):
        cls_attention_grid(torch.rand(1, 1, 10, 10), (3, 3), num_prefix_tokens=2)


def test_cls_attention_grid_of_a_vitlib_model():
    model = vitlib.create_model("ViT-Micro/4", num_classes=10, image_size=28, in_channels=1).eval()
    maps = model.attention_maps(torch.rand(2, 1, 28, 28))
    grid = cls_attention_grid(maps[0], model.patch_embed.grid)
    assert grid.shape == (2, 4, 7, 7)


def test_attention_overlay_draws_image_and_map():
    att = torch.rand(7, 7)
    ax = show_attention_overlay(torch.rand(1, 28, 28), att, title="layer 1")
    assert len(ax.images) == 2
    np.testing.assert_allclose(ax.images[1].get_array(), att.double().numpy())
    assert ax.images[1].get_extent() == [-0.5, 27.5, 27.5, -0.5]
    with pytest.raises(ValueError, match="one attention map"):
        show_attention_overlay(torch.rand(1, 28, 28), torch.rand(2, 7, 7))


def test_attention_overlay_colorbar_and_shared_scale():
    ax = show_attention_overlay(torch.rand(1, 28, 28), torch.rand(7, 7) * 0.2, colorbar=True, label="rollout share")
    overlay = ax.images[1]
    assert overlay.colorbar is not None and overlay.colorbar.ax.get_ylabel() == "rollout share"
    assert show_attention_overlay(torch.rand(1, 28, 28), torch.rand(7, 7)).images[1].colorbar is None  # default: none
    fig, axes = plt.subplots(1, 2)
    for a in axes:
        show_attention_overlay(torch.rand(1, 28, 28), torch.rand(7, 7) * 0.3, ax=a, vmax=0.5)
    assert [a.images[1].get_clim() for a in axes] == [(0.0, 0.5), (0.0, 0.5)]
    bar = overlay_colorbar(axes, label="share")
    assert bar.ax.get_ylabel() == "share" and bar.mappable is axes[0].images[1]
    show_attention_overlay(torch.rand(1, 28, 28), torch.rand(7, 7), ax=axes[1])  # its own maximum: another scale
    with pytest.raises(ValueError, match="colour scales"):
        overlay_colorbar(axes)


def test_attention_distance_axis_cannot_zoom_onto_noise():
    grid, p = (7, 7), 4
    largest = patch_distances(grid, p).max().item()
    dots = 14.4 + 0.5 * torch.rand(4, 4)  # every head within a pixel of uniform attention
    ax = plot_attention_distance(dots, max_distance=largest)
    assert ax.get_ylim() == (0.0, pytest.approx(largest))  # 0 to the largest distance, not the dots' 0.5-px range
    assert "pixels" in ax.get_ylabel() and "layer" in ax.get_xlabel()
    plot_attention_distance(dots - 5, ax=ax)  # a second set on the same axes keeps the span
    assert ax.get_ylim() == (0.0, pytest.approx(largest))
    assert plot_attention_distance(dots, image_size=28).get_ylim() == (0.0, pytest.approx(28 * math.sqrt(2)))
    assert plot_attention_distance(dots).get_ylim()[0] == 0.0  # no span given: still from 0


def test_time_call_is_the_mean_of_the_timed_block(monkeypatch):
    """On a clock that only the calls move (torch.utils.benchmark.Timer reads timeit.default_timer): the Timer's 2
    warm-up calls of 100 s are not timed, then calls of 3, 1 and 8 s are timed as one block: 4 s per call."""
    now, durations = [0.0], iter([100.0, 100.0, 3.0, 1.0, 8.0])
    monkeypatch.setattr(timeit, "default_timer", lambda: now[0])

    def call():
        now[0] += next(durations)

    threads = torch.get_num_threads()
    assert time_call(call, repeats=3, threads=1) == 4.0
    assert next(durations, "all used") == "all used"  # exactly 2 + 3 calls
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError):
        time_call(lambda: None, repeats=0)


def test_attention_helper_matches_sdpa():
    q, k, v = torch.randn(3, 2, 4, 9, 8)
    out, weights = attention(q, k, v)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 9))


def test_attention_cost_rows_have_exact_memory():
    rows = attention_cost([4, 16, 32], dim=8, heads=2, batch=3, repeats=1)
    assert [r["N"] for r in rows] == [4, 16, 32]
    for r in rows:
        assert r["weights_bytes"] == 3 * 2 * r["N"] ** 2 * 4 == attention_weights_bytes(r["N"], heads=2, batch=3)
        assert r["macs"] == 2 * 3 * r["N"] ** 2 * 8
        assert r["seconds"] > 0
    assert attention_weights_bytes(197) == 197 * 197 * 4
    assert attention_weights_bytes(10, dtype=torch.bfloat16) == 200
    with pytest.raises(ValueError, match="divisible"):
        attention_cost([4], dim=10, heads=3)
    with pytest.raises(ValueError, match="positive"):
        attention_cost([])


def test_loglog_slope_recovers_exponents():
    x = [16, 32, 64, 128, 256]
    assert math.isclose(loglog_slope(x, [3 * n**2 for n in x]), 2.0)
    assert math.isclose(loglog_slope(x, [n**1.5 for n in x], min_x=64), 1.5)
    y = [1.0, 1.0, 1.0, 128.0**2, 256.0**2]  # flat, then quadratic: the fit from 128 on sees only the quadratic part
    assert math.isclose(loglog_slope(x, y, min_x=128), 2.0)
    with pytest.raises(ValueError, match="two positive points"):
        loglog_slope(x, [n**2 for n in x], min_x=1000)


def test_attention_cost_restores_the_thread_setting():
    before = torch.get_num_threads()
    attention_cost([8], dim=8, repeats=1, threads=1)
    assert torch.get_num_threads() == before
