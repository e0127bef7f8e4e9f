import math

import matplotlib

matplotlib.use("Agg")
import pytest
import torch

from vitlib import VisionTransformer
from vitlib.analysis.attention import (
    attention_rollout,
    class_attention,
    mean_attention_distance,
    rollout_maps,
)
from vitlib.analysis.embeddings import embedding_filters, patch_distances


@pytest.fixture
def vit():
    torch.manual_seed(0)
    return VisionTransformer(
        image_size=16, patch_size=4, in_channels=3, num_classes=5, dim=32, depth=3, heads=2, mlp_dim=64
    ).eval()


def test_patch_distances_in_pixels():
    d = patch_distances((2, 3), patch_size=4)
    assert d.shape == (6, 6) and torch.all(d.diagonal() == 0)
    assert d[0, 1] == 4 and d[0, 3] == 4 and d[0, 5] == pytest.approx(math.hypot(4, 8))


def test_a_head_that_attends_only_to_itself_has_distance_zero():
    n, prefix = 9, 1
    w = torch.eye(prefix + n).expand(2, 3, -1, -1)
    dist = mean_attention_distance([w, w], (3, 3, 4, prefix))
    assert dist.shape == (2, 3) and torch.all(dist == 0)


def test_uniform_attention_distance_is_the_mean_pairwise_distance():
    gh = gw = 3
    w = torch.full((1, 1, gh * gw, gh * gw), 1 / (gh * gw))
    dist = mean_attention_distance(w, (gh, gw, 2, 0))
    assert dist.item() == pytest.approx(patch_distances((gh, gw), 2).mean().item(), rel=1e-6)


def test_attention_to_the_class_token_is_left_out():
    # each patch attends half to [class], half to its right-hand neighbour (4 px away) -> distance 4 after renormalising
    n = 4  # a 1x4 grid
    w = torch.zeros(1, 1, 1 + n, 1 + n)
    w[..., :, 0] = 0.5
    for i in range(n):
        w[0, 0, 1 + i, 1 + min(i + 1, n - 1)] += 0.5
    w[0, 0, 0, 0] = 0.5
    dist = mean_attention_distance(w, (1, n, 4, 1))
    assert dist.item() == pytest.approx(4 * 3 / 4)  # the last patch attends to itself


def test_mean_attention_distance_of_a_real_model(vit):
    weights = vit.attention_maps(torch.randn(2, 3, 16, 16))
    dist = mean_attention_distance(weights, vit)
    assert dist.shape == (3, 2)
    assert torch.all(dist >= 0) and torch.all(dist <= patch_distances((4, 4), 4).max())


def test_rollout_of_identity_attention_is_identity():
    eye = torch.eye(5).expand(2, 4, 5, 5)
    r = attention_rollout([eye, eye, eye])
    assert torch.allclose(r, torch.eye(5).expand(2, 5, 5))


def test_rollout_is_the_product_of_residual_averaged_layers():
    torch.manual_seed(0)
    ws = [torch.softmax(torch.randn(1, 2, 4, 4), -1) for _ in range(3)]
    r = attention_rollout(ws)
    by_hand = torch.eye(4, dtype=torch.float64)
    for w in ws:
        a = 0.5 * w.double().mean(1)[0] + 0.5 * torch.eye(4, dtype=torch.float64)
        by_hand = a @ by_hand
    assert torch.allclose(r[0].double(), by_hand, atol=1e-6)
    assert torch.allclose(r.sum(-1), torch.ones(1, 4))
    no_res = attention_rollout(ws, add_residual=False)
    assert torch.allclose(
        no_res[0].double(), ws[2].double().mean(1)[0] @ ws[1].double().mean(1)[0] @ ws[0].double().mean(1)[0], atol=1e-6
    )


def test_rollout_maps_work_through_the_fused_model(vit):
    assert vit.blocks[0].attn.fused  # the analysis asks for weights; the fast path is used otherwise
    maps = rollout_maps(vit.attention_maps(torch.randn(3, 3, 16, 16)), vit)
    assert maps.shape == (3, 4, 4) and torch.allclose(maps.sum((1, 2)), torch.ones(3))


def test_class_attention_is_row_zero_without_the_prefix_columns():
    torch.manual_seed(0)
    w = torch.rand(2, 3, 5, 5).softmax(-1)  # (B, heads, L, L): [class] + a 2x2 grid
    assert torch.equal(class_attention(w), w[..., 0, 1:])
    on_grid = class_attention(w, 1, grid=(2, 2), renormalise=True)
    assert on_grid.shape == (2, 3, 2, 2)
    torch.testing.assert_close(on_grid.sum((-2, -1)), torch.ones(2, 3))
    assert torch.equal(class_attention(w, 0), w.mean(-2))  # no [class] token: what the tokens attend to on average
    with pytest.raises(ValueError, match="do not fit"):
        class_attention(w, 1, grid=(3, 3))


def test_rollout_errors_are_clear(vit):
    with pytest.raises(ValueError, match="no attention weights"):
        attention_rollout([])
    with pytest.raises(ValueError, match="head_fusion"):
        attention_rollout([torch.eye(3).expand(1, 1, 3, 3)], head_fusion="median")
    with pytest.raises(ValueError, match="L = 1 prefix"):
        rollout_maps([torch.eye(5).expand(1, 1, 5, 5)], vit)


def test_embedding_filters_are_orthonormal_principal_components(vit):
    comps, share = embedding_filters(vit, k=5)
    assert comps.shape == (5, 3, 4, 4)
    flat = comps.reshape(5, -1)
    assert torch.allclose(flat @ flat.T, torch.eye(5), atol=1e-5)
    assert torch.all(share[:-1] >= share[1:]) and share.sum() <= 1 + 1e-6
    # the first component is the direction of largest variance of E's rows
    e = vit.patch_embed.proj.weight.detach().reshape(32, -1)  # (D, C, P, P) as D filters
    e = e - e.mean(0)
    var = lambda v: (e @ v).var()
    assert var(flat[0]) >= var(flat[1]) >= var(flat[4])
