"""vitlib.train.optim.EMA: the numbers of torch's AveragedModel with an EMA, without a host-device sync per update."""

from __future__ import annotations

import pytest
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from vitlib import create_model
from vitlib.train.optim import EMA


def test_ema_equals_torchs_averaged_model_bit_for_bit():
    torch.manual_seed(0)
    model = create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1)
    reference, ours = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9)), EMA(model, 0.9)
    for _ in range(4):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        reference.update_parameters(model)
        ours.update_parameters(model)
    assert reference.state_dict().keys() == ours.state_dict().keys()  # checkpoints stay interchangeable
    for (name, a), b in zip(reference.state_dict().items(), ours.state_dict().values()):
        assert torch.equal(a, b), name
    assert ours.n_averaged.device.type == "cpu" and int(ours.n_averaged) == 4
    # after 4 updates the average is not the last weights: it lags behind them
    assert not torch.equal(ours.module.head.weight, model.head.weight)


def test_ema_decay_must_be_a_fraction():
    with pytest.raises(ValueError, match="between 0 and 1"):
        EMA(torch.nn.Linear(2, 2), 1.0)
