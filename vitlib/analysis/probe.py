"""Linear evaluation of a frozen representation (section 4.1 'few-shot / linear' results, section 4.6): the pooled
features y = LN(z_L^0) of a fixed ViT, then a linear classifier fitted on top with L-BFGS and an L2 penalty; or, with
no fitting at all, DINO's weighted k-nearest-neighbour classifier (`knn_accuracy`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..data import Dataset, TensorLoader, TensorSplit


@torch.no_grad()
def extract_features(
    model: nn.Module, split: TensorSplit, data: Dataset, batch_size: int = 512, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(features (N, D), labels (N,)) of a split: what the model's classifier head receives (for a ViT the pooled
    y = LN(z_L^0) of eq. 4, for a CNN its globally pooled feature map), read with a hook on `model.head`."""
    if not isinstance(split, TensorSplit):
        raise TypeError("extract_features works on in-memory splits; for image folders, load a subset first.")
    head = getattr(model, "head", None)
    if not isinstance(head, nn.Module):
        raise TypeError(f"{type(model).__name__} has no `head` module whose input could be read as its features.")
    was = model.training
    model.eval().to(device)
    feats, labels = [], []
    hook = head.register_forward_hook(lambda module, inputs, output: feats.append(inputs[0].float().cpu()))
    try:
        for images, y in TensorLoader(split, batch_size, data.mean, data.std, device=device).epoch(0):
            model(images)
            labels.append(y.cpu())
    finally:
        hook.remove()
        model.train(was)
    return torch.cat(feats), torch.cat(labels)


def linear_probe(train_x, train_y, test_x, test_y, l2: float = 1e-4, steps: int = 100) -> dict:
    """Fit softmax regression on standardised features (N, D) (full batch, L-BFGS); returns train and test accuracy."""
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


def knn_accuracy(train_x, train_y, test_x, test_y, k: int = 20, temperature: float | None = 0.07, batch=1024) -> float:
    """Weighted k-NN classification as in DINO (Caron et al. 2021, after Wu et al. 2018): cosine similarity to the
    training features, the k nearest each vote for their class with weight exp(similarity / temperature) (a plain
    majority vote with temperature=None); the accuracy on the test features."""
    if len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise ValueError("features and labels differ in length.")
    if not 0 < k <= len(train_x):
        raise ValueError(f"k must be between 1 and the number of training features ({len(train_x)}), got {k}.")
    a, b = F.normalize(train_x.float(), dim=1), F.normalize(test_x.float(), dim=1)
    classes, correct = int(max(train_y.max(), test_y.max())) + 1, 0
    for i in range(0, len(b), batch):
        sim, idx = (b[i : i + batch] @ a.T).topk(k, dim=1)
        weight = torch.ones_like(sim) if temperature is None else (sim / temperature).exp()
        votes = torch.zeros(len(sim), classes).scatter_add_(1, train_y[idx], weight)
        correct += (votes.argmax(1) == test_y[i : i + batch]).sum().item()
    return correct / len(b)
