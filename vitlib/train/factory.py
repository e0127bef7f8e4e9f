"""From a TrainConfig to the pieces of a run: the device and precision, the model sized for the data set (wrapped in
its objective), its configuration as a checkpoint records it, and the loaders."""

from __future__ import annotations

import torch
from torch import nn

from ..data import Dataset, FolderLoader, TensorLoader, TensorSplit
from ..model import create_cnn, create_model, is_cnn_name, parse_name
from ..objectives import wrap
from .config import TrainConfig


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for but no CUDA GPU is available: use device='cpu'.")
    return torch.device(device)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a precision option ('auto': bf16 on a GPU that has it, else full precision)."""
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def build_model(cfg: TrainConfig, data: Dataset) -> nn.Module:
    """The model named by cfg.model, sized for the data set; for a self-supervised objective, the ViT without a head
    wrapped in its objective (MAE or MaskedPatchPrediction), whose forward returns the loss."""
    if is_cnn_name(cfg.model):
        return create_cnn(cfg.model, data.num_classes, data.in_channels)
    extra = {k: getattr(cfg, k) for k in ("pos_embed", "pool", "dropout", "drop_path") if getattr(cfg, k) is not None}
    common = dict(image_size=data.image_size, in_channels=data.in_channels, fused=cfg.fused_attention, **extra)
    if cfg.objective != "classify":
        return wrap(cfg.objective, create_model(cfg.model, num_classes=0, **common), data.mean, data.std)
    model = create_model(cfg.model, num_classes=data.num_classes, **common)
    if cfg.head == "mlp":  # built a second time, with the tanh layer of width D (the order keeps the runs' draws)
        model = create_model(
            cfg.model, num_classes=data.num_classes, head_hidden=parse_name(cfg.model)["dim"], **common
        )
    return model


def model_config(model: nn.Module, objective: str) -> dict:
    """What a checkpoint and model.safetensors record about the model: the ViT's config (the one inside an MAE / MPP
    wrapper) or a CNN's, with its kind and, for a self-supervised run, the objective."""
    config = getattr(model, "config", None) or getattr(getattr(model, "vit", None), "config", {})
    out = dict(config.to_dict() if hasattr(config, "to_dict") else config, kind=type(model).__name__)
    if objective != "classify":  # the ViT inside an MAE / MPP wrapper: vitlib.train.load_pretrained takes it out
        out["objective"] = objective
    return out


def make_loader(split, data: Dataset, cfg: TrainConfig, train: bool, device, rank: int = 0, world: int = 1):
    """A loader of one split: shuffled, augmented (cfg.augment) and without the last partial batch for training;
    in order and as it is otherwise. In-memory splits get a TensorLoader, image folders a FolderLoader."""
    kw = dict(
        batch_size=cfg.batch_size,
        mean=data.mean,
        std=data.std,
        shuffle=train,
        augment=cfg.augment if train else "none",
        seed=cfg.seed,
        drop_last=train,
        device=device,
        rank=rank,
        world_size=world,
    )
    if isinstance(split, TensorSplit):
        return TensorLoader(split, **kw)
    return FolderLoader(split, data.image_size, num_workers=cfg.num_workers, **kw)
