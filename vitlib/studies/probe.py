"""Linear evaluation of a frozen representation (section 4.1 'few-shot / linear' results, section 4.6): the pooled
features y = LN(z_L^0) of a fixed ViT, then a linear classifier fitted on top with L-BFGS and an L2 penalty."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..data import Dataset, TensorLoader, TensorSplit


@torch.no_grad()
def extract_features(
    model: nn.Module, split: TensorSplit, data: Dataset, batch_size: int = 512, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(features (N, D), labels (N,)) of a split, from `model.pool_features(model.forward_features(x))`."""
    if not isinstance(split, TensorSplit):
        raise TypeError(
            "extract_features works on in-memory splits (TensorSplit); for image folders, load a subset first."
        )
    was = model.training
    model.eval().to(device)
    loader = TensorLoader(split, batch_size, data.mean, data.std, device=device)
    feats, labels = [], []
    for images, y in loader.epoch(0):
        feats.append(model.pool_features(model.forward_features(images)).float().cpu())
        labels.append(y.cpu())
    model.train(was)
    return torch.cat(feats), torch.cat(labels)


def linear_probe(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    l2: float = 1e-4,
    steps: int = 100,
) -> dict:
    """Fit softmax regression on standardised features (full batch, L-BFGS); returns train and test accuracy."""
    if len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise ValueError("features and labels differ in length.")
    mean, std = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
    a, b = (train_x - mean) / std, (test_x - mean) / std
    k = int(max(train_y.max(), test_y.max())) + 1
    layer = nn.Linear(a.shape[1], k)
    opt = torch.optim.LBFGS(layer.parameters(), lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(layer(a), train_y) + l2 * layer.weight.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return {
            "train_acc": (layer(a).argmax(1) == train_y).float().mean().item(),
            "test_acc": (layer(b).argmax(1) == test_y).float().mean().item(),
        }
