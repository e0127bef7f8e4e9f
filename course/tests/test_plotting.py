"""Figures: what each plotting helper draws can be checked from the returned Axes."""

import csv

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from course.plotting import (
    PATCH_GRID_GID,
    confusion_matrix,
    plot_confusion_matrix,
    plot_history,  # noqa: E402
    show_images,
    show_patch_grid,
    show_patch_sequence,
)

HISTORY = [
    {"epoch": e, "train_loss": 2.0 / e, "train_acc": 0.5 + 0.1 * e, "test_loss": 2.2 / e, "test_acc": 0.45 + 0.1 * e}
    for e in (1, 2, 3)
]


def teardown_function():
    plt.close("all")


def test_patch_grid_and_sequence():
    image = torch.rand(3, 32, 32)
    ax = show_patch_grid(image, 8)
    assert sum(line.get_gid() == PATCH_GRID_GID for line in ax.lines) == 3 + 3
    patches = torch.rand(16, 8 * 8 * 3)
    ax = show_patch_sequence(patches, 8)
    assert len(ax.images) == 16


def test_plot_history_draws_each_split_and_metric():
    loss_ax, acc_ax = plot_history(HISTORY)
    assert [line.get_label() for line in loss_ax.lines] == ["train", "test"]
    assert list(acc_ax.lines[1].get_ydata()) == [r["test_acc"] for r in HISTORY]
    assert list(loss_ax.lines[0].get_xdata()) == [1, 2, 3]


def test_plot_history_compares_runs_on_the_same_axes():
    axes = plot_history(HISTORY, label="pre-LN")
    plot_history(HISTORY[:2], axes=axes, label="post-LN")
    labels = [line.get_label() for line in axes[0].lines]
    assert labels == ["pre-LN train", "pre-LN test", "post-LN train", "post-LN test"]
    assert axes[0].lines[0].get_color() == axes[0].lines[1].get_color() != axes[0].lines[2].get_color()


def test_plot_history_reads_metrics_csv(tmp_path):
    path = tmp_path / "metrics.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(HISTORY[0]))
        w.writeheader()
        w.writerows(HISTORY)
    loss_ax, _ = plot_history(path)
    assert len(loss_ax.lines) == 2


def test_plot_history_rejects_an_empty_history():
    with pytest.raises(ValueError, match="empty"):
        plot_history([])


def test_confusion_matrix_counts():
    labels = torch.tensor([0, 0, 1, 2, 2, 2])
    preds = torch.tensor([0, 1, 1, 2, 0, 2])
    counts = confusion_matrix(preds, labels, 3)
    assert counts.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    assert counts.sum() == len(labels) and counts.trace() == (preds == labels).sum()
    ax = plot_confusion_matrix(counts, ["a", "b", "c"])
    assert ax.images[0].get_array().shape == (3, 3)
    with pytest.raises(ValueError, match="2-class matrix was expected"):
        plot_confusion_matrix(counts, ["a", "b"])


def test_show_images_one_image_per_axes():
    fig = show_images(torch.rand(5, 1, 8, 8), titles=list("abcde"), cols=3)
    assert sum(len(ax.images) for ax in fig.axes) == 5
    assert [ax.get_title() for ax in fig.axes if ax.images] == list("abcde")
