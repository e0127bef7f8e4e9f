"""Section 3.1: x in R^{H x W x C} -> x_p in R^{N x (P^2 C)}, N = HW/P^2, and the patch embedding E."""

import pytest
import torch
from torch import nn

from vitlib import PatchEmbedding, check_patch_size, patchify, unpatchify

# (channels, height, width, patch size): square, grey, rectangular and one-patch images
SHAPES = [(3, 32, 32, 8), (1, 28, 28, 4), (3, 16, 24, 4), (2, 12, 12, 12), (3, 6, 6, 1)]


@pytest.mark.parametrize("c, h, w, p", SHAPES)
def test_patchify_shape(c, h, w, p):
    patches = patchify(torch.randn(2, c, h, w), p)
    assert patches.shape == (2, h * w // p**2, p * p * c)


@pytest.mark.parametrize("c, h, w, p", SHAPES)
def test_unpatchify_inverts_patchify(c, h, w, p):
    x = torch.randn(2, c, h, w)
    assert torch.equal(unpatchify(patchify(x, p), p, (h // p, w // p), c), x)


def test_patch_order_is_row_major_and_each_patch_is_flattened_p1_p2_c():
    p, x = 4, torch.randn(2, 3, 8, 12)  # a 2x3 grid of patches
    patches = patchify(x, p)

    def flat(block):  # (B, C, P, P) -> (B, P*P*C) in (p1 p2 c) order
        return block.permute(0, 2, 3, 1).reshape(block.shape[0], -1)

    assert torch.equal(patches[:, 0], flat(x[:, :, :p, :p]))
    assert torch.equal(patches[:, 1], flat(x[:, :, :p, p : 2 * p]))  # next patch: same row, next column
    assert torch.equal(patches[:, 3], flat(x[:, :, p : 2 * p, :p]))  # grid width 3: patch 3 starts row 2
    assert torch.equal(patches[:, 0, :3], x[:, :, 0, 0])  # channels vary fastest
    assert torch.equal(patches[:, 0, 3:6], x[:, :, 0, 1])


@pytest.mark.parametrize("size, p", [((30, 30), 8), ((28, 32), 8), ((28, 28), 5)])
def test_patch_size_that_does_not_divide_the_image_is_a_clear_error(size, p):
    h, w = size
    with pytest.raises(ValueError, match=rf"patch size {p} .*{h}x{w}"):
        patchify(torch.zeros(1, 3, h, w), p)
    with pytest.raises(ValueError, match=rf"{h}x{w}"):
        PatchEmbedding(image_size=size, patch_size=p, in_channels=3, dim=16)


def test_check_patch_size_returns_the_grid_and_rejects_bad_input():
    assert check_patch_size(224, 16) == (14, 14)
    assert check_patch_size((32, 48), 8) == (4, 6)
    with pytest.raises(ValueError, match="positive"):
        check_patch_size(32, 0)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\).*\(3, 32, 32\)"):
        patchify(torch.zeros(3, 32, 32), 8)
    with pytest.raises(ValueError, match=r"expected patches of shape"):
        unpatchify(torch.zeros(1, 16, 48), 4, (3, 3), 3)


@pytest.mark.parametrize("c, h, w, p", SHAPES)
def test_patch_embedding_conv_and_linear_paths_agree(c, h, w, p):
    conv = PatchEmbedding(image_size=(h, w), patch_size=p, in_channels=c, dim=16, conv=True)
    linear = PatchEmbedding(image_size=(h, w), patch_size=p, in_channels=c, dim=16, conv=False)
    linear.load_state_dict(conv.state_dict())
    x = torch.randn(2, c, h, w)
    out = conv(x)
    assert out.shape == (2, h * w // p**2, 16)
    torch.testing.assert_close(out, linear(x), atol=1e-5, rtol=1e-5)
    # the linear path is E applied to the flattened patches, x_p E + b (eq. 1)
    e = conv.linear_weight()  # E as the (D, P^2 C) matrix over patchify's (p1 p2 c) order
    assert e.shape == (16, p * p * c)
    torch.testing.assert_close(linear(x), patchify(x, p) @ e.T + conv.proj.bias, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("conv_path", [True, False])
def test_patch_embedding_equals_a_strided_conv2d_like_torchvision_conv_proj(conv_path):
    c, p, dim = 3, 8, 24
    embed = PatchEmbedding(image_size=32, patch_size=p, in_channels=c, dim=dim, conv=conv_path)
    ref = nn.Conv2d(c, dim, kernel_size=p, stride=p)
    with torch.no_grad():
        ref.weight.copy_(embed.proj.weight)  # timm's and torchvision's layout: (D, C, P, P)
        ref.bias.copy_(embed.proj.bias)
    assert embed.proj.weight.shape == (dim, c, p, p)
    x = torch.randn(2, c, 32, 32)
    torch.testing.assert_close(embed(x), ref(x).flatten(2).transpose(1, 2), atol=1e-5, rtol=1e-5)


def test_patch_embedding_resize_keeps_e_and_follows_the_grid():
    embed = PatchEmbedding(image_size=32, patch_size=8, in_channels=3, dim=16)
    weight = embed.proj.weight.clone()
    embed.resize((48, 64))  # section 3.2: the same P and E, more patches
    assert embed.grid == (6, 8) and embed.num_patches == 48 and torch.equal(embed.proj.weight, weight)
    assert embed(torch.randn(1, 3, 48, 64)).shape == (1, 48, 16)
    with pytest.raises(ValueError, match="patch size 8"):
        embed.resize(30)
    assert embed.grid == (6, 8)  # a refused size changes nothing
