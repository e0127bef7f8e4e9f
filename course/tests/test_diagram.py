"""Fig. 1 as drawn by course.diagram: every box of the paper's figure, and the image's own patches when given."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from course.diagram import draw_vit

BOXES = ("Linear projection", "Transformer encoder", "MLP head", "Multi-head attention", "MLP", "Norm", "[class]")


@pytest.mark.parametrize("num_tokens", [4, 9])
def test_every_box_of_fig_1_is_drawn(num_tokens):
    image = torch.rand(1, 28, 28)
    fig = draw_vit(image, patch_size=7, num_tokens=num_tokens, depth_label="12")
    ax = fig.axes[0]
    texts = " | ".join(t.get_text() for t in ax.texts)
    assert all(box in texts for box in BOXES), texts
    assert "12 blocks" in texts
    assert len(ax.images) == num_tokens  # one tile per patch drawn
    first = ax.images[0].get_array()
    assert torch.allclose(torch.as_tensor(first.data), image[0, :7, :7])  # the image's top-left patch, in place
    tokens = [t.get_text() for t in ax.texts if t.get_text().isdigit()]
    assert tokens == [str(i) for i in range(num_tokens + 1)]  # position 0 is the [class] token's
    plt.close(fig)


def test_without_an_image_the_patches_are_boxes():
    fig = draw_vit()
    assert not fig.axes[0].images
    plt.close(fig)
