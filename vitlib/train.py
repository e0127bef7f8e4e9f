"""One training loop for ViT, the hybrid and the CNN baselines, from a 2-core CPU to several GPUs (torchrun + DDP,
or FSDP2 with --fsdp to shard ViT-L/H).

    from vitlib.train import TrainConfig, train
    result = train(TrainConfig(dataset="fashion-mnist-mini", model="ViT-Micro/4", epochs=3, out="runs/first"))

    python -m vitlib.train --dataset fashion-mnist-mini --model ViT-Micro/4 --epochs 3 --out runs/first [--resume]
    python -m vitlib.train --preset paper-imagenet --dataset imagefolder:/data/imagenet --out runs/b16   # Table 3
    python -m vitlib.train --preset mae --objective mae ...       # self-supervised, on the same pipeline
    torchrun --nproc_per_node=8 -m vitlib.train --preset paper-imagenet --dataset imagefolder:/data/imagenet ...
    torchrun --nproc_per_node=8 -m vitlib.train --preset paper-imagenet --model ViT-H/14 --fsdp ...  # sharded

The paper's recipe (section 3, appendix B.1): Adam(W) with beta1 0.9, beta2 0.999 and weight decay, linear warm-up
then cosine or linear decay, gradient clipping at global norm 1. Checkpoints (`vitlib.checkpoint`) hold everything
needed to continue exactly: on the CPU a resumed run ends with the same weights, bit for bit, as an uninterrupted one.
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from . import __version__
from .checkpoint import CheckpointError, gather_full_state, load_checkpoint, save_checkpoint
from .cnn import create_cnn, is_cnn_name
from .data import DataError
from .datasets import Dataset, TensorSplit, get_dataset
from .encoder import EncoderBlock
from .ema import EMA
from .loader import AUGMENTATIONS, FolderLoader, TensorLoader, batch_seed
from .mae import MAE
from .masked import MaskedPatchPrediction
from .model import create_model
from .presets import describe as describe_presets
from .presets import preset_options


@dataclass
class TrainConfig:
    """Every option of a run; `python -m vitlib.train --help` lists them with these defaults."""
    dataset: str = "fashion-mnist-mini"
    model: str = "ViT-Micro/4"
    objective: str = "classify"
    out: str | None = None
    epochs: int = 10
    steps: int = 0
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    beta1: float = 0.9
    beta2: float = 0.999
    warmup_epochs: float = 1.0
    schedule: str = "cosine"
    grad_clip: float = 1.0
    label_smoothing: float = 0.0
    augment: str = "none"
    mixup: float = 0.0
    cutmix: float = 0.0
    ema: float = 0.0
    precision: str = "auto"
    compile: bool = False
    device: str = "auto"
    seed: int = 0
    subset: float | None = None
    val_fraction: float = 0.1
    image_size: int | None = None
    data_root: str | None = None
    download: bool = False
    num_workers: int = 4
    pos_embed: str | None = None
    pool: str | None = None
    dropout: float | None = None
    drop_path: float | None = None
    head: str = "linear"
    fused_attention: bool = True
    channels_last: bool = False
    fsdp: bool = False
    checkpoint_every: int = 0
    resume: bool = False
    time_budget: float = 0.0
    log_every: int = 20
    eval_every: int = 1
    eval_test: bool = True
    progress: bool = True

    @classmethod
    def from_preset(cls, name: str | None, **overrides) -> "TrainConfig":
        """A named recipe of vitlib.presets (e.g. 'paper-imagenet', 'deit', 'fmnist-5min'); keyword options win."""
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown TrainConfig option(s) {unknown}: see python -m vitlib.train --help.")
        return cls(**{**preset_options(name), **overrides})


HELP = {
    "dataset": "data set name (vitlib.datasets.dataset_names(): fashion-mnist-mini, fashion-mnist, mnist, cifar10, "
               "cifar100, imagenette, synthetic-position, imagefolder:<path>)",
    "model": "vitlib variant ('ViT-Micro/4', 'ViT-B/16', 'R50+ViT-B/16') or CNN baseline ('ResNet-8', 'resnet18')",
    "objective": "classify (supervised, the labels), mae (masked autoencoder) or mpp (the paper's masked patch "
                 "prediction, section 4.6): the last two never look at a label",
    "out": "output folder for metrics and checkpoints (none: keep nothing on disk)",
    "epochs": "passes over the training set", "batch_size": "global batch size (split across processes)",
    "steps": "train for exactly this many optimizer steps, however many epochs that is (0: epochs decide)",
    "lr": "peak learning rate", "min_lr": "learning rate at the end of the decay",
    "weight_decay": "AdamW weight decay (not applied to biases, norms, E_pos and the [class] token)",
    "beta1": "Adam beta1", "beta2": "Adam beta2", "warmup_epochs": "linear warm-up length in epochs (may be fractional)",
    "schedule": "decay after warm-up: cosine, linear or constant", "grad_clip": "clip the global gradient norm (0: off)",
    "label_smoothing": "label smoothing of the cross-entropy", "augment": f"augmentation preset: {', '.join(AUGMENTATIONS)}",
    "mixup": "mixup alpha (0: off)", "cutmix": "cutmix alpha (0: off); with both, one of the two per batch",
    "ema": "decay of an exponential moving average of the weights, evaluated instead of the weights (0: off)",
    "precision": "fp32, bf16, fp16 or auto (bf16 on a GPU that has it, else fp32)",
    "compile": "torch.compile the model", "device": "cpu, cuda, cuda:N or auto", "seed": "fixes init, data order and augmentation",
    "subset": "keep a stratified part of the training set: a fraction <= 1 or a count",
    "val_fraction": "stratified fraction of the training set held out for validation",
    "image_size": "resize images to this side (default: the data set's own)", "data_root": "where data sets are (default data/cache or $VITLIB_DATA_DIR)",
    "download": "download the data set if it is missing (needs internet)", "num_workers": "DataLoader workers for folders of images",
    "pos_embed": "position embedding: learned, none, learned2d, sincos2d, relative", "pool": "cls or gap",
    "dropout": "dropout rate in the encoder", "drop_path": "stochastic depth rate (deepest block)",
    "head": "linear (zero-initialised, section 3.2) or mlp (one tanh hidden layer, pre-training)",
    "fused_attention": "F.scaled_dot_product_attention (off: the written-out softmax)",
    "channels_last": "feed the images (and the patch-embedding convolution) in channels-last memory format",
    "fsdp": "under torchrun, shard weights, gradients and AdamW state over the processes with FSDP2 (every encoder "
            "block, then the rest) instead of DDP, for ViT-L/H; checkpoints and model.safetensors still hold whole "
            "tensors. In one process it changes nothing. Refused (in any process count) with ema, a CNN, or "
            "channels_last on a hybrid",
    "checkpoint_every": "also checkpoint every N steps (0: at epoch ends only)", "resume": "continue from out/checkpoint.safetensors",
    "time_budget": "stop cleanly after this many minutes and save (0: no limit)", "log_every": "steps between progress updates",
    "eval_every": "evaluate (validation, else test split) every N epochs and after the last (0: never during the run)",
    "eval_test": "evaluate on the test set at the end", "progress": "show tqdm progress bars",
}
SCHEDULES, PRECISIONS = ("cosine", "linear", "constant"), ("auto", "fp32", "bf16", "fp16")
OBJECTIVES = ("classify", "mae", "mpp")


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite."""


NO_STEP = 2**62  # bad_step while every loss is finite


@dataclass
class Result:
    model: nn.Module
    history: list[dict] = field(default_factory=list)    # one row per epoch
    steps: list[dict] = field(default_factory=list)      # one row per log interval
    test: dict | None = None
    out: Path | None = None
    stopped: str = "done"

    @property
    def final(self) -> dict:
        return self.history[-1] if self.history else {}


# ------------------------------------------------------------------------------------------------------- pieces
def check_config(cfg: TrainConfig) -> None:
    for name, allowed in (("schedule", SCHEDULES), ("precision", PRECISIONS), ("augment", AUGMENTATIONS),
                          ("head", ("linear", "mlp")), ("objective", OBJECTIVES)):
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"unknown {name} {getattr(cfg, name)!r}: choose one of {', '.join(allowed)}.")
    for name in ("epochs", "batch_size"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be at least 1, got {getattr(cfg, name)}.")
    if cfg.steps < 0:
        raise ValueError(f"steps must be 0 (epochs decide) or a number of optimizer steps, got {cfg.steps}.")
    if cfg.eval_every < 0:
        raise ValueError(f"eval_every must be 0 (never) or a number of epochs, got {cfg.eval_every}.")
    if cfg.lr <= 0:
        raise ValueError(f"lr must be positive, got {cfg.lr}.")
    if cfg.resume and not cfg.out:
        raise ValueError("resume needs out= (the folder with checkpoint.safetensors).")
    if cfg.objective != "classify":
        used = [k for k in ("mixup", "cutmix", "label_smoothing") if getattr(cfg, k)]
        if used:
            raise ValueError(f"objective={cfg.objective!r} never looks at a label, so {', '.join(used)} has nothing to "
                             f"act on: set {' and '.join(f'{k}=0' for k in used)}.")
        if is_cnn_name(cfg.model):
            raise ValueError(f"objective={cfg.objective!r} pre-trains a ViT; {cfg.model!r} is a CNN.")
    if cfg.fsdp:  # refused in one process too, so that a one-process trial finds out before a long multi-GPU run
        if is_cnn_name(cfg.model):
            raise ValueError(f"fsdp shards a ViT's encoder blocks; {cfg.model!r} is a CNN, small enough for plain DDP: "
                             f"drop fsdp.")
        if cfg.ema > 0:
            raise ValueError("fsdp with ema is not supported: the EMA would be a whole, unsharded copy of the weights on "
                             "every process, which is what fsdp avoids. Set ema=0 or drop fsdp.")


def build_model(cfg: TrainConfig, data: Dataset) -> nn.Module:
    """The model named by cfg.model, sized for the data set; for a self-supervised objective, the ViT without a head
    wrapped in its objective (MAE or MaskedPatchPrediction), whose forward returns the loss."""
    if is_cnn_name(cfg.model):
        return create_cnn(cfg.model, data.num_classes, data.in_channels)
    extra = {k: getattr(cfg, k) for k in ("pos_embed", "pool", "dropout", "drop_path") if getattr(cfg, k) is not None}
    common = dict(image_size=data.image_size, in_channels=data.in_channels, fused=cfg.fused_attention, **extra)
    if cfg.objective != "classify":
        vit = create_model(cfg.model, num_classes=0, **common)
        return MAE(vit) if cfg.objective == "mae" else MaskedPatchPrediction(vit, mean=data.mean, std=data.std)
    model = create_model(cfg.model, num_classes=data.num_classes, **common)
    if cfg.head == "mlp":  # the hidden width is D, known once built (the build order keeps the runs' random draws)
        model = create_model(cfg.model, num_classes=data.num_classes, head_hidden=model.config["dim"], **common)
    return model


def shard_model(model: nn.Module, device: torch.device, world: int) -> nn.Module:
    """FSDP2, in place: each EncoderBlock (the ViT's, and an MAE decoder's) becomes a unit whose weights are gathered
    just for its forward and backward, then the root takes the rest (embeddings, norm, head, decoder extras). Weights,
    gradients and AdamW state are split over the processes (DTensors); `world` 1: nothing to split, left as it is."""
    blocks = [m for m in model.modules() if isinstance(m, EncoderBlock)]
    if not blocks:
        raise ValueError(f"fsdp shards a ViT's encoder blocks, and {type(model).__name__} has none: drop fsdp "
                         f"(several processes then use DDP).")
    strided = [name for name, p in model.named_parameters() if not p.is_contiguous()]
    if strided:
        raise ValueError(f"FSDP cannot shard non-contiguous weights ({', '.join(strided[:3])}, ...): channels_last "
                         f"turns a hybrid's CNN filters channels-last. Drop channels_last or fsdp.")
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh(device.type, (world,))
        for block in blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model


def _all_finite(model: nn.Module, sharded: bool) -> bool:
    """Whether every weight is finite; sharded: each process checks its shards, then they agree (a collective)."""
    if not sharded:
        return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())
    model.reshard()  # the root's weights stay gathered after a forward without backward (an evaluation)
    finite = torch.stack([torch.isfinite(p.to_local()).all() for p in model.parameters()]).all().int()
    dist.all_reduce(finite, op=dist.ReduceOp.MIN)
    return bool(finite)


def _sync_buffers(model: nn.Module) -> None:
    """FSDP shards the parameters only: buffers (a hybrid's BatchNorm running statistics) are each process's own.
    Evaluate with rank 0's, the ones a checkpoint keeps (DDP too sends rank 0's buffers to all, at every forward)."""
    for buffer in model.buffers():
        dist.broadcast(buffer, 0)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices only: not on biases, norms, position embeddings or the [class] token."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim <= 1 or "pos_embed" in name or "cls_token" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_lambda(cfg: TrainConfig, total_steps: int, warmup_steps: int):
    """Linear warm-up to lr, then cosine / linear decay to min_lr (as a factor of lr)."""
    floor = cfg.min_lr / cfg.lr

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        t = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        if cfg.schedule == "cosine":
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))
        if cfg.schedule == "linear":
            return floor + (1 - floor) * max(0.0, 1 - t)
        return 1.0
    return factor


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for but no CUDA GPU is available: use device='cpu'.")
    return torch.device(device)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def make_loader(split, data: Dataset, cfg: TrainConfig, train: bool, device, rank: int = 0, world: int = 1):
    kw = dict(batch_size=cfg.batch_size, mean=data.mean, std=data.std, shuffle=train,
              augment=cfg.augment if train else "none", seed=cfg.seed, drop_last=train, device=device,
              rank=rank, world_size=world)
    if isinstance(split, TensorSplit):
        return TensorLoader(split, **kw)
    return FolderLoader(split, data.image_size, num_workers=cfg.num_workers, **kw)


def objective_of(model: nn.Module) -> str:
    """'mae', 'mpp' or 'classify': what the model's forward computes."""
    model = getattr(model, "module", model)  # DDP, EMA (AveragedModel) and torch.compile wrappers
    model = getattr(model, "_orig_mod", model)
    return "mae" if isinstance(model, MAE) else "mpp" if isinstance(model, MaskedPatchPrediction) else "classify"


def batch_loss(net: nn.Module, images: torch.Tensor, targets: torch.Tensor, objective: str = "classify",
               label_smoothing: float = 0.0, reduction: str = "mean"):
    """(loss, correct predictions in the batch or None, logits or None) for one batch: cross-entropy on the labels, or the
    self-supervised objective's own loss (MPP: the hidden patches' colour classes; MAE: pixels, no accuracy)."""
    if objective == "classify":
        logits = net(images).float()
        loss = F.cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction=reduction)
        hard = targets.argmax(1) if targets.ndim == 2 else targets
        return loss, (logits.argmax(1) == hard).sum(), logits
    out = net(images)
    loss = out[0] * len(images) if reduction == "sum" else out[0]
    return loss, (out[1] * len(images) if objective == "mpp" else None), None


@torch.no_grad()
def evaluate(model: nn.Module, loader, dtype: torch.dtype | None = None, return_predictions: bool = False):
    """Mean loss and accuracy over a loader (all processes' shares summed under DDP). For MAE there is no accuracy;
    the self-supervised objectives hide the same patches at every evaluation (a fixed seed per batch). Under DDP or
    FSDP every process calls it with its loader (FSDP gathers each block's weights for the forward: a collective)."""
    model.eval()
    device = loader.device
    objective = objective_of(model)
    totals = torch.zeros(3, device=device, dtype=torch.float64)  # loss sum, correct, count
    preds, labels = [], []
    for step, (images, y) in enumerate(loader.epoch(0)):
        with torch.random.fork_rng(devices=[] if objective == "classify" else None):
            if objective != "classify":
                torch.manual_seed(batch_seed(0, 0, step))
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss, correct, logits = batch_loss(model, images, y, objective, reduction="sum")
        totals[0] += loss.double()
        if correct is not None:
            totals[1] += correct.double()
        totals[2] += len(y)
        if return_predictions and logits is not None:
            preds.append(logits.argmax(1).cpu())
            labels.append(y.cpu())
    if dist.is_initialized():
        dist.all_reduce(totals)
    loss, correct, count = totals.tolist()
    out = {"loss": loss / max(count, 1), "acc": correct / max(count, 1), "n": int(count)}
    if objective == "mae":
        del out["acc"]
    if return_predictions and preds:
        out["predictions"], out["labels"] = torch.cat(preds), torch.cat(labels)
    return out


def _mixer(cfg: TrainConfig, num_classes: int):
    import torchvision.transforms.v2 as T
    ops = ([T.MixUp(alpha=cfg.mixup, num_classes=num_classes)] if cfg.mixup > 0 else []) + \
          ([T.CutMix(alpha=cfg.cutmix, num_classes=num_classes)] if cfg.cutmix > 0 else [])
    return T.RandomChoice(ops) if len(ops) > 1 else (ops[0] if ops else None)


class _Logs:
    """Metrics history: CSV (per epoch and per log interval) and JSON in out/, TensorBoard when it is installed."""

    def __init__(self, out: Path | None, steps: list[dict], history: list[dict], enabled: bool):
        self.out, self.steps, self.history, self.tb = out, steps, history, None
        if out is not None and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self.tb = SummaryWriter(str(out / "tensorboard"))
            except Exception:  # tensorboard not installed
                self.tb = None

    def step(self, row: dict) -> None:
        self.steps.append(row)
        if self.tb:
            for k, v in row.items():
                if k != "step":
                    self.tb.add_scalar(f"train/{k}", v, row["step"])

    def epoch(self, row: dict) -> None:
        self.history.append(row)
        if self.tb:
            for k, v in row.items():
                if k not in ("epoch", "step"):
                    self.tb.add_scalar(f"epoch/{k}", v, row["step"])
        self.flush()

    def flush(self) -> None:
        if self.out is None:
            return
        for name, rows in (("metrics.csv", self.history), ("steps.csv", self.steps)):
            if rows:
                keys = list(dict.fromkeys(k for r in rows for k in r))
                with open(self.out / name, "w", newline="") as f:
                    w = csv.DictWriter(f, keys)
                    w.writeheader()
                    w.writerows(rows)


def _past(started: float, minutes: float, device: torch.device) -> bool:
    """Whether the time budget is spent; under DDP rank 0's clock decides for all, so they stop at the same step."""
    past = time.perf_counter() - started > minutes * 60
    if dist.is_initialized():
        flag = torch.tensor([float(past)], device=device)
        dist.broadcast(flag, 0)
        past = bool(flag.item())
    return past


def _setup_distributed() -> tuple[int, int, int]:
    """(rank, world size, local rank); starts the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))
    return 0, 1, 0


# --------------------------------------------------------------------------------------------------- the loop
def train(cfg: TrainConfig, model: nn.Module | None = None, data: Dataset | None = None) -> Result:
    """Train cfg.model (or `model`) on cfg.dataset (or `data`); returns the model, the metrics and the test result.
    With fsdp under torchrun the model returned is the sharded one (out/model.safetensors holds it whole)."""
    check_config(cfg)
    rank, world, local_rank = _setup_distributed()
    device = resolve_device(cfg.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    out = Path(cfg.out) if cfg.out else None
    ckpt_path = out / "checkpoint.safetensors" if out else None
    if ckpt_path is not None and ckpt_path.exists() and not cfg.resume:
        raise FileExistsError(f"{ckpt_path} already exists: pass resume=True (--resume) to continue that run, or choose "
                              f"another output folder. Nothing was overwritten.")
    if cfg.resume and not ckpt_path.exists():
        raise FileNotFoundError(f"resume asked for, but there is no checkpoint at {ckpt_path}.")

    torch.manual_seed(cfg.seed)
    data = data or get_dataset(cfg.dataset, root=cfg.data_root, download=cfg.download, val_fraction=cfg.val_fraction,
                               subset=cfg.subset, image_size=cfg.image_size, seed=cfg.seed)
    model = (model or build_model(cfg, data)).to(device)
    if cfg.channels_last:
        model = model.to(memory_format=torch.channels_last)
    objective = objective_of(model)
    if objective != cfg.objective:
        raise ValueError(f"objective={cfg.objective!r} but the model given computes {objective!r}: wrap the ViT in "
                         f"vitlib.mae.MAE / vitlib.masked.MaskedPatchPrediction, or set objective={objective!r}.")
    model_config = dict(getattr(model, "config", None) or getattr(getattr(model, "vit", None), "config", {}),
                        kind=type(model).__name__)
    if objective != "classify":  # the ViT inside an MAE / MPP wrapper: vitlib.finetune.load_pretrained takes it out
        model_config["objective"] = objective
    sharded = cfg.fsdp and world > 1  # FSDP instead of DDP; the optimiser below then holds the shards
    if cfg.fsdp:
        shard_model(model, device, world)
    train_loader = make_loader(data.train, data, cfg, True, device, rank, world)
    eval_loaders = {name: make_loader(split, data, cfg, False, device, rank, world)
                    for name, split in (("val", data.val), ("test", data.test)) if split is not None}
    steps_per_epoch = len(train_loader)
    if steps_per_epoch == 0:
        raise ValueError(f"the training set ({len(data.train)} images) is smaller than one batch ({cfg.batch_size}): "
                         f"lower batch_size.")
    total_steps = cfg.steps or cfg.epochs * steps_per_epoch
    epochs = math.ceil(total_steps / steps_per_epoch)  # with a step budget the last epoch may stop part-way
    warmup_steps = max(1, round(cfg.warmup_epochs * steps_per_epoch))

    optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                                  fused=device.type == "cuda")
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, total_steps, warmup_steps))
    ema = None
    if cfg.ema > 0:
        ema = EMA(model, cfg.ema)
    dtype = autocast_dtype(cfg.precision, device)
    scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
    mixer = _mixer(cfg, data.num_classes)

    result = Result(model=model, out=out)
    start_epoch = start_step = 0
    start_sums = None  # the epoch's running loss sum, correct and count up to a mid-epoch checkpoint
    if cfg.resume:
        meta = load_checkpoint(ckpt_path, model, optimizer, scheduler, ema, model_config=model_config, sharded=sharded)
        start_epoch, start_step = meta["progress"]["epoch"], meta["progress"]["step_in_epoch"]
        start_sums = meta["progress"].get("sums")
        result.history, result.steps = meta.get("history", []), meta.get("steps", [])
    if out is not None and rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"train": dataclasses.asdict(cfg), "model": model_config,
                                                     "data": repr(data), "vitlib": __version__,
                                                     "torch": torch.__version__, "processes": world,
                                                     "parallel": "fsdp" if sharded else "ddp" if world > 1 else "none"},
                                                    indent=2))
    logs = _Logs(out if rank == 0 else None, result.steps, result.history, enabled=True)

    net = model
    if world > 1 and not sharded:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    step_fn = torch.compile(net) if cfg.compile else net

    def check_finite(bad_step: torch.Tensor, epoch: int) -> None:
        """Raise if a loss so far was NaN or infinite (a sync; under DDP every process raises together)."""
        if dist.is_initialized():
            dist.all_reduce(bad_step, op=dist.ReduceOp.MIN)
        if int(bad_step) < NO_STEP:
            where = f"the last good checkpoint is {ckpt_path}" if ckpt_path and ckpt_path.exists() else "no checkpoint was written"
            raise NonFiniteLossError(f"the loss became non-finite at step {int(bad_step) + 1} (epoch {epoch + 1}); "
                                     f"{where}. Lower lr, raise warmup_epochs or keep grad_clip on.")

    def checkpoint(epoch: int, step_in_epoch: int, sums=None, bad_step=None) -> None:
        """Save the run; mid-epoch with the epoch's running sums. Only finite losses and weights are ever saved."""
        if ckpt_path is None:
            return
        if bad_step is not None:
            check_finite(bad_step, epoch)
        step = epoch * steps_per_epoch + step_in_epoch
        if not _all_finite(model, sharded):
            raise NonFiniteLossError(f"the weights became non-finite by step {step} (epoch {epoch + 1}); the last good "
                                     f"checkpoint is {ckpt_path if ckpt_path.exists() else 'none'}. Lower lr, raise "
                                     f"warmup_epochs or keep grad_clip on.")
        if sums is not None and dist.is_initialized():
            sums = sums.clone()
            dist.all_reduce(sums)  # rank 0 keeps every process's share; on resume the others start from zero
        whole = gather_full_state(model, optimizer) if sharded else (None, None)  # sharded: every process takes part
        if rank == 0:
            save_checkpoint(ckpt_path, model, optimizer, scheduler, ema,
                            progress={"epoch": epoch, "step_in_epoch": step_in_epoch, "global_step": step,
                                      "sums": sums.tolist() if sums is not None else None},
                            meta={"model_config": model_config, "config": dataclasses.asdict(cfg),
                                  "history": result.history, "steps": result.steps, "vitlib": __version__},
                            model_state=whole[0], optimizer_state=whole[1])

    started = time.perf_counter()
    show = cfg.progress and rank == 0
    for epoch in range(start_epoch, epochs):
        net.train()
        first = start_step if epoch == start_epoch else 0
        sums = torch.zeros(3, device=device, dtype=torch.float64)    # loss sum, correct, count: no sync per step
        if epoch == start_epoch and start_sums and rank == 0:         # resumed mid-epoch: the steps before count too
            sums += torch.tensor(start_sums, device=device, dtype=torch.float64)
        bad_step = torch.full((), NO_STEP, device=device, dtype=torch.long)  # the first step with a non-finite loss
        bar = tqdm(total=steps_per_epoch, initial=first, desc=f"epoch {epoch + 1}/{epochs}", disable=not show,
                   leave=True, dynamic_ncols=True, unit="step")
        t_log, n_log = time.perf_counter(), 0
        stop = None
        for i, (images, labels) in enumerate(train_loader.epoch(epoch, first), start=first):
            step = epoch * steps_per_epoch + i
            targets = labels
            if mixer is not None:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(batch_seed(cfg.seed + 1, epoch, i))
                    images, targets = mixer(images, labels)
            if cfg.channels_last:
                images = images.contiguous(memory_format=torch.channels_last)
            if objective != "classify":  # which patches are hidden depends on (seed, epoch, step) only: resumable
                torch.manual_seed(batch_seed(cfg.seed + 2, epoch, i))
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss, correct, _ = batch_loss(step_fn, images, targets, objective, cfg.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            if cfg.grad_clip > 0:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            if ema is not None:
                ema.update_parameters(model)
            with torch.no_grad():  # no host-device copy or sync in the step: scalars go in as kernel arguments
                sums[0] += loss.detach().double() * len(labels)
                if correct is not None:
                    sums[1] += correct.double()
                sums[2] += len(labels)
                bad_step = torch.where((bad_step == NO_STEP) & ~torch.isfinite(loss.detach()), step, bad_step)
            n_log += len(labels) * world
            last = i + 1 == steps_per_epoch or step + 1 == total_steps
            if (i + 1) % cfg.log_every == 0 or last:
                check_finite(bad_step, epoch)  # the only sync, once per log interval
                loss_sum, correct, count = sums.tolist()
                ips = n_log / (time.perf_counter() - t_log)
                row = {"step": step + 1, "epoch": epoch + (i + 1) / steps_per_epoch, "loss": loss_sum / count,
                       "acc": correct / count, "lr": scheduler.get_last_lr()[0], "images_per_s": ips}
                if objective == "mae":
                    del row["acc"]
                logs.step(row)
                bar.set_postfix(loss=f"{row['loss']:.3f}", acc=f"{row.get('acc', float('nan')):.3f}", img_s=f"{ips:.0f}",
                                refresh=False)
                t_log, n_log = time.perf_counter(), 0
            bar.update(1)
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and not last:
                checkpoint(epoch, i + 1, sums, bad_step)
            if cfg.time_budget and not last and _past(started, cfg.time_budget, device):
                stop = (epoch, i + 1)
                break
            if last:
                break
        bar.close()
        if stop is not None:
            checkpoint(*stop, sums, bad_step)
            result.stopped = f"time budget of {cfg.time_budget} min reached at epoch {stop[0] + 1}, step {stop[1]}"
            if show:
                print(result.stopped + (f"; checkpoint in {ckpt_path} (continue with resume)" if ckpt_path else ""))
            break
        if dist.is_initialized():
            dist.all_reduce(sums)
        loss_sum, correct, count = sums.tolist()
        row = {"epoch": epoch + 1, "step": min((epoch + 1) * steps_per_epoch, total_steps), "train_loss": loss_sum / max(count, 1),
               "train_acc": correct / max(count, 1), "lr": scheduler.get_last_lr()[0],
               "time_s": time.perf_counter() - started}
        if objective == "mae":
            del row["train_acc"]
        split = "val" if "val" in eval_loaders else "test"   # without a validation split, watch the test set
        due = cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch + 1 == epochs)
        if split in eval_loaders and due:
            if sharded:
                _sync_buffers(model)
            ev = evaluate(ema.module if ema else model, eval_loaders[split], dtype)
            row.update({f"{split}_{k}": ev[k] for k in ("loss", "acc") if k in ev})
        logs.epoch(row)
        if show and f"{split}_loss" in row:
            acc = lambda key: f" acc {row[key]:.4f}" if key in row else ""  # noqa: E731
            print(f"epoch {epoch + 1}: train loss {row['train_loss']:.4f}{acc('train_acc')} | "
                  f"{split} loss {row[f'{split}_loss']:.4f}{acc(f'{split}_acc')} | {row['time_s']:.0f} s")
        checkpoint(epoch + 1, 0)
    logs.flush()
    final = ema.module if ema else model
    if cfg.eval_test and "test" in eval_loaders and result.stopped == "done":
        if sharded:
            _sync_buffers(model)
        result.test = evaluate(final, eval_loaders["test"], dtype)
        if out is not None and rank == 0:
            (out / "test.json").write_text(json.dumps(result.test, indent=2))
    weights = gather_full_state(final)[0] if sharded and out is not None else None  # every process takes part
    if out is not None and rank == 0:
        from safetensors.torch import save_file
        weights = final.state_dict() if weights is None else weights
        save_file({k: v.contiguous().cpu() for k, v in weights.items()}, str(out / "model.safetensors"),
                  metadata={"model_config": json.dumps(model_config), "vitlib": __version__})
    result.model = final
    return result


# ----------------------------------------------------------------------------------------------- command line
def _parse_optional(kind):
    def parse(text: str):
        return None if text.lower() in ("none", "null", "") else kind(text)
    return parse


def make_parser(preset: str | None = None) -> argparse.ArgumentParser:
    """The command line; with a preset, its options are the defaults (so any option given explicitly wins)."""
    ap = argparse.ArgumentParser(prog="python -m vitlib.train", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter, allow_abbrev=False)
    # absent from the parsed namespace unless given, so TrainConfig(**vars(make_parser().parse_args(argv))) still works
    ap.add_argument("--preset", default=argparse.SUPPRESS, metavar="NAME",
                    help="a named recipe of vitlib.presets (paper-imagenet, deit, mae, mpp, fmnist-5min, ...); options "
                         "given explicitly override it")
    ap.add_argument("--list-presets", action="store_true", default=argparse.SUPPRESS,
                    help="describe every preset and exit")
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=HELP[f.name])
            continue
        base = {"int": int, "float": float, "str": str}
        kind = f.type if not isinstance(f.type, str) else f.type.split("|")[0].strip()
        parse = base.get(kind, float if "float" in kind else str)
        if "None" in str(f.type):
            parse = _parse_optional(parse)
        ap.add_argument(flag, type=parse, default=f.default, help=HELP[f.name], metavar=kind.upper())
    ap.set_defaults(**preset_options(preset))
    return ap


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """The TrainConfig of a command line: the options of --preset (if any) are the defaults, the options given win."""
    first, _ = make_parser().parse_known_args(argv)  # which preset, if any, gives the defaults
    args = vars(make_parser(getattr(first, "preset", None)).parse_args(argv))
    args.pop("preset", None)
    args.pop("list_presets", None)
    return TrainConfig(**args)


def main(argv: list[str] | None = None) -> int:
    if getattr(make_parser().parse_known_args(argv)[0], "list_presets", False):
        print(describe_presets())
        return 0
    try:
        cfg = parse_config(argv)
    except ValueError as err:  # an unknown preset
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        result = train(cfg)
    except (ValueError, FileExistsError, FileNotFoundError, CheckpointError, NonFiniteLossError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if result.test and int(os.environ.get("RANK", "0")) == 0:
        print(f"test: loss {result.test['loss']:.4f} acc {result.test['acc']:.4f} ({result.test['n']} images)")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
