"""Notebook 13's and 14's helpers: one number per claim (course.figures), and pre-trained weights + images
(course.reference)."""

import numpy as np
import pytest
import torch
from PIL import Image

from course.figures import depth_trend, local_head_ratio
from course.reference import load_image_folder, load_reference_vit
from vitlib.analysis.attention import mean_attention_distance


def test_depth_trend_is_the_correlation_of_layer_and_distance():
    rising = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert depth_trend(rising) > 0.9
    assert depth_trend(rising.flip(0)) < -0.9
    assert depth_trend(torch.tensor([[1.0, 5.0], [1.0, 5.0]])) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="layers >= 2"):
        depth_trend(torch.ones(1, 4))


def test_local_head_ratio_puts_grids_of_any_stride_on_one_scale():
    gh = gw = 3
    uniform = torch.full((1, 1, 1 + gh * gw, 1 + gh * gw), 1 / (1 + gh * gw))
    own = torch.eye(1 + gh * gw)[None, None]
    w = torch.cat([uniform, own], dim=1)  # head 0 attends everywhere alike, head 1 to its own token
    for stride in (2, 8):
        dist = mean_attention_distance([w, w.flip(1)], (gh, gw, stride, 1))
        assert local_head_ratio(dist, (gh, gw, stride, 1)) == 0
        assert local_head_ratio(dist[:, :1], (gh, gw, stride, 1)) == pytest.approx(1, rel=1e-6)
        assert local_head_ratio(dist, (gh, gw, stride, 1), layer=1) == 0


def _small_torchvision_vit():
    from torchvision.models.vision_transformer import VisionTransformer as TV

    torch.manual_seed(0)
    return TV(
        image_size=32, patch_size=16, num_layers=2, num_heads=3, hidden_dim=192, mlp_dim=384, num_classes=7
    ).eval()


def test_reference_weights_from_a_torchvision_state_dict(tmp_path):
    tv = _small_torchvision_vit()
    torch.save(tv.state_dict(), tmp_path / "tv.pth")
    torch.save({"model": tv.state_dict()}, tmp_path / "wrapped.pth")
    x = torch.randn(2, 3, 32, 32)
    for name in ("tv.pth", "wrapped.pth"):
        model, mean, std = load_reference_vit(tmp_path / name)
        assert mean == (0.485, 0.456, 0.406) and std == (0.229, 0.224, 0.225)
        with torch.no_grad():
            assert torch.allclose(model(x), tv(x), atol=1e-5)
        assert mean_attention_distance(model.attention_maps(x), model).shape == (2, 3)


def test_reference_weights_from_a_timm_state_dict(tmp_path):
    pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    torch.manual_seed(0)
    src = TimmViT(img_size=32, patch_size=16, embed_dim=192, depth=2, num_heads=3, num_classes=5).eval()
    torch.save(src.state_dict(), tmp_path / "timm.pth")
    model, mean, std = load_reference_vit(tmp_path / "timm.pth")
    assert mean == std == (0.5, 0.5, 0.5) and model.config.heads == 3
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(model(x), src(x), atol=1e-5)


def test_reference_weight_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no weight file"):
        load_reference_vit(tmp_path / "missing.npz")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="could not be read"):
        load_reference_vit(tmp_path / "junk.pth")
    torch.save({"fc.weight": torch.zeros(2, 2)}, tmp_path / "other.pth")
    with pytest.raises(ValueError, match="neither a torchvision"):
        load_reference_vit(tmp_path / "other.pth")


def test_image_folder_is_resized_cropped_and_normalised(tmp_path):
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (40, 60, 3), dtype=np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "sub").mkdir()
    Image.fromarray(rng.integers(0, 255, (30, 30), dtype=np.uint8)).save(tmp_path / "sub" / "b.jpg")  # grey -> RGB
    (tmp_path / "notes.txt").write_text("not an image")
    shown, x, names = load_image_folder(tmp_path, 16, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))
    assert names == ["a.png", "b.jpg"] and shown.shape == x.shape == (2, 3, 16, 16)
    assert shown.min() >= 0 and shown.max() <= 1 and torch.allclose(x, (shown - 0.5) / 0.25)
    assert load_image_folder(tmp_path, 16, (0.5,) * 3, (0.5,) * 3, limit=1)[0].shape[0] == 1
    with pytest.raises(FileNotFoundError, match="no folder"):
        load_image_folder(tmp_path / "nowhere", 16, (0.5,) * 3, (0.5,) * 3)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image files"):
        load_image_folder(tmp_path / "empty", 16, (0.5,) * 3, (0.5,) * 3)
