"""vitlib.analysis.embeddings.position_structure / similarity_by_distance: Fig. 7 (center) as numbers."""

import math

import pytest
import torch

from vitlib import create_model
from vitlib.analysis.embeddings import position_similarity, position_structure, similarity_by_distance
from vitlib.model import sincos_2d


def smooth_grid(gh, gw, dim=32):
    """Embeddings that vary smoothly over the grid: near patches alike, far ones not."""
    r, c = torch.meshgrid(torch.arange(gh).double(), torch.arange(gw).double(), indexing="ij")
    freqs = torch.linspace(0.3, 1.2, dim // 4).double()
    r, c = r.flatten()[:, None] * freqs, c.flatten()[:, None] * freqs
    return torch.cat([r.sin(), r.cos(), c.sin(), c.cos()], dim=1).float()


def test_the_numbers_match_a_direct_computation():
    gh, gw = 3, 4
    emb = torch.randn(gh * gw, 16, generator=torch.Generator().manual_seed(0))
    s = position_structure(emb, (gh, gw))
    sim = position_similarity(emb, (gh, gw)).reshape(gh * gw, gh * gw).double()
    cells = [(i // gw, i % gw) for i in range(gh * gw)]
    adjacent = [
        sim[i, j]
        for i in range(12)
        for j in range(12)
        if abs(cells[i][0] - cells[j][0]) + abs(cells[i][1] - cells[j][1]) == 1
    ]
    far = [
        sim[i, j]
        for i in range(12)
        for j in range(12)
        if max(abs(cells[i][0] - cells[j][0]), abs(cells[i][1] - cells[j][1])) >= 2
    ]
    assert s["grid"] == (gh, gw)
    assert math.isclose(s["neighbour"], float(torch.stack(adjacent).mean()), abs_tol=1e-9)
    assert math.isclose(s["far"], float(torch.stack(far).mean()), abs_tol=1e-9)
    assert math.isclose(s["gap"], s["neighbour"] - s["far"], abs_tol=1e-12)
    assert s["self_is_max"] == 1.0
    touching = [
        sum(1 for j in range(12) if j != i and max(abs(cells[i][0] - cells[j][0]), abs(cells[i][1] - cells[j][1])) <= 1)
        for i in range(12)
    ]
    assert math.isclose(s["chance_nearest"], sum(t / 11 for t in touching) / 12)


def test_smooth_embeddings_show_the_structure_and_random_ones_do_not():
    smooth = position_structure(smooth_grid(5, 5), (5, 5))
    assert smooth["gap"] > 0.1 and smooth["distance_corr"] < -0.5 and smooth["nearest_is_neighbour"] == 1.0
    gaps = [
        position_structure(torch.randn(25, 256, generator=torch.Generator().manual_seed(s)))["gap"] for s in range(5)
    ]
    assert abs(sum(gaps) / len(gaps)) < 0.05  # random vectors: no near/far difference


def test_sincos_embeddings_fall_off_with_distance():
    rows = similarity_by_distance(sincos_2d((4, 4), 64))
    assert rows[0][0] == 1.0 and rows[0][2] == 24  # 4x4 grid: 24 side-by-side pairs
    assert sum(r[2] for r in rows) == 16 * 15 // 2  # every pair once
    assert rows[0][1] > rows[-1][1]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


def test_a_model_and_its_class_embedding():
    model = create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1, pos_embed="learned")
    s_model = position_structure(model)
    s_tensor = position_structure(model.pos_embed[0, 1:], (4, 4))
    assert s_model == s_tensor
    twin = torch.zeros(16, 8)
    twin[:, 0] = 1.0  # every patch the same embedding: nothing is more similar to itself than to the others
    assert position_structure(twin)["self_is_max"] == 0.0


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="add nothing"):
        position_structure(create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1, pos_embed="none"))
    with pytest.raises(ValueError, match="no pairs"):
        position_structure(torch.randn(1, 8), (1, 1))


def test_line_effect_finds_a_row_column_structure():
    rows, cols = torch.arange(49) // 7, torch.arange(49) % 7
    by_line = torch.cat([torch.nn.functional.one_hot(rows, 7), torch.nn.functional.one_hot(cols, 7)], 1).float()
    assert position_structure(by_line)["line_effect"] == pytest.approx(0.5, abs=1e-6)  # same row or column: +0.5
    torch.manual_seed(0)
    assert abs(position_structure(torch.randn(49, 64))["line_effect"]) < 0.05  # random: none
