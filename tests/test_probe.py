import torch

from vitlib import VisionTransformer
from vitlib.analysis.probe import extract_features, linear_probe
from vitlib.data import get_dataset


def test_linear_probe_separates_separable_features():
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(3, 8, generator=g) * 4
    y = torch.randint(0, 3, (300,), generator=g)
    x = centres[y] + torch.randn(300, 8, generator=g)
    res = linear_probe(x[:200], y[:200], x[200:], y[200:])
    assert res["train_acc"] > 0.95 and res["test_acc"] > 0.9


def test_linear_probe_on_noise_is_near_chance():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(400, 16, generator=g), torch.randint(0, 4, (400,), generator=g)
    assert linear_probe(x[:200], y[:200], x[200:], y[200:], l2=1e-2)["test_acc"] < 0.4


def test_extract_features_of_a_frozen_vit(one_thread):
    data = get_dataset("fashion-mnist-mini", subset=64, seed=0)
    model = VisionTransformer(
        image_size=28, patch_size=7, in_channels=1, num_classes=10, dim=32, depth=1, heads=2, mlp_dim=64
    )
    model.train()
    x, y = extract_features(model, data.train, data, batch_size=50)
    assert x.shape == (len(data.train), 32) and torch.equal(y, data.train.labels)
    assert model.training  # restored
