"""The pieces of a run, built from its options in one pass (`build_parts`, called by `vitlib.train.run`): the seed, the
data, the model sized for it and its config, the loaders, the schedule length, optimiser, EMA, precision, objective."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..data import (
    Dataset,
    FolderLoader,
    TensorLoader,
    TensorSplit,
    check_finite_images,
    check_labels,
    get_dataset,
    make_mixer,
)
from ..model import VisionTransformer, create_cnn, create_model, is_cnn_name, parse_name
from ..objectives import get_objective, objective_name, wrap
from . import distributed
from .config import TrainConfig
from .optim import EMA, make_optimizer


def build_parts(cfg: TrainConfig, model: nn.Module | None, data: Dataset | None, device, rank: int, world: int) -> dict:
    """Every piece of a run, in the order that fixes its random draws: seed, data, model, loaders, optimiser."""
    torch.manual_seed(cfg.seed)
    options = {k: getattr(cfg, k) for k in ("download", "val_fraction", "subset", "image_size", "seed")}
    data = data or get_dataset(cfg.dataset, root=cfg.data_root, **options)
    check_finite_images(data)
    check_labels(data)
    if cfg.patience and data.val is None:
        raise ValueError(
            "patience (early stopping) chooses the weights on the validation split, and this data set has "
            "none: set val_fraction > 0 (the test set must not choose anything)."
        )
    model = _model(cfg, model, data, device)
    config = model_config(model, cfg.objective)  # before FSDP, which changes the model's class
    sharded = cfg.fsdp and world > 1  # FSDP instead of DDP; the optimiser below then holds the shards
    if cfg.fsdp:
        distributed.shard_model(model, device, world)
    train_loader = make_loader(data.train, data, cfg, True, device, rank, world)
    splits = {name: split for name, split in (("val", data.val), ("test", data.test)) if split is not None}
    eval_loaders = {name: make_loader(split, data, cfg, False, device, rank, world) for name, split in splits.items()}
    per_epoch = len(train_loader)
    if per_epoch == 0:
        raise ValueError(
            f"the training set ({len(data.train)} images) is smaller than one batch ({cfg.batch_size}): "
            "lower batch_size."
        )
    total_steps = cfg.steps or cfg.epochs * per_epoch  # with a step budget the last epoch may stop part-way
    warmup_steps = max(1, round(cfg.warmup_epochs * per_epoch))
    optimizer, scheduler = make_optimizer(model, cfg, device, total_steps, warmup_steps)
    dtype = autocast_dtype(cfg.precision, device)
    net = model
    if world > 1 and not sharded:  # DDP: the gradients averaged over the processes at every backward
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    return dict(
        data=data,
        model=model,
        net=torch.compile(net) if cfg.compile else net,
        objective=get_objective(cfg.objective, cfg.label_smoothing),
        model_config=config,
        sharded=sharded,
        train_loader=train_loader,
        eval_loaders=eval_loaders,
        total_steps=total_steps,
        epochs=math.ceil(total_steps / per_epoch),
        optimizer=optimizer,
        scheduler=scheduler,
        ema=EMA(model, cfg.ema) if cfg.ema > 0 else None,
        dtype=dtype,
        scaler=torch.amp.GradScaler(device.type, enabled=dtype == torch.float16),
        mixer=make_mixer(cfg.mixup, cfg.cutmix, data.num_classes),
    )


def _model(cfg: TrainConfig, model: nn.Module | None, data: Dataset, device: torch.device) -> nn.Module:
    """The model given or built, on the device, and checked to compute cfg.objective."""
    model = (model or build_model(cfg, data)).to(device)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    computes = objective_name(model)
    if computes != cfg.objective:
        raise ValueError(
            f"objective={cfg.objective!r} but the model given computes {computes!r}: wrap the ViT in "
            f"vitlib.objectives.MAE / MaskedPatchPrediction, or set objective={computes!r}."
        )
    return model


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of a precision option ('auto': bf16 on a GPU that has it, else full precision)."""
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def build_model(cfg: TrainConfig, data: Dataset) -> nn.Module:
    """cfg.model sized for the data set; for a self-supervised objective, the headless ViT wrapped in it."""
    if is_cnn_name(cfg.model):
        return create_cnn(cfg.model, data.num_classes, data.in_channels)
    extra = {k: getattr(cfg, k) for k in ("pos_embed", "pool", "dropout", "drop_path") if getattr(cfg, k) is not None}
    common = dict(image_size=data.image_size, in_channels=data.in_channels, fused=cfg.fused_attention, **extra)
    if cfg.objective != "classify":
        return wrap(cfg.objective, create_model(cfg.model, num_classes=0, **common), data.mean, data.std)
    hidden = parse_name(cfg.model)["dim"] if cfg.head == "mlp" else None  # the pre-training head's tanh layer
    return create_model(cfg.model, num_classes=data.num_classes, head_hidden=hidden, **common)


def model_config(model: nn.Module, objective: str) -> dict:
    """What the saved files record: the ViT's (or CNN's) config, its kind and a self-supervised run's objective."""
    config = getattr(model, "config", None) or getattr(getattr(model, "vit", None), "config", {})
    kind = "VisionTransformer" if isinstance(model, VisionTransformer) else type(model).__name__  # a variant's too
    out = dict(config.to_dict() if hasattr(config, "to_dict") else config, kind=kind)
    if objective != "classify":  # the ViT inside an MAE / MPP wrapper: vitlib.train.load_pretrained takes it out
        out["objective"] = objective
    return out


def make_loader(split, data: Dataset, cfg: TrainConfig, train: bool, device, rank: int = 0, world: int = 1):
    """A loader of one split; for training shuffled, augmented and without the last partial batch."""
    kw = dict(batch_size=cfg.batch_size, mean=data.mean, std=data.std, seed=cfg.seed, device=device, rank=rank)
    kw.update(world_size=world, shuffle=train, drop_last=train, augment=cfg.augment if train else "none")
    if isinstance(split, TensorSplit):
        return TensorLoader(split, **kw)
    return FolderLoader(split, data.image_size, num_workers=cfg.num_workers, **kw)
