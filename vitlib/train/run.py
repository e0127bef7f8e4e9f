"""Setting a run up: the output folder, the device and processes, the data, the model in its objective, the loaders,
the optimiser and schedule, EMA and precision, and where a resumed run continues. `start` gathers them in a `Run`,
the state the loop (`vitlib.train.loop`) steps."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .._version import __version__
from ..data import Dataset, check_finite_images, get_dataset, make_mixer
from ..objectives import get_objective, objective_name
from . import distributed
from .checkpoint import CheckpointError, load_checkpoint, read_checkpoint
from .config import CHANGEABLE_OPTIONS, TrainConfig, allowed_changes, check_config, resume_differences
from .ema import EMA
from .factory import autocast_dtype, build_model, make_loader, model_config, resolve_device
from .folder import RunFolderError, RunLock, check_folder, remove_stale_temporaries, say
from .metrics import MetricsLog
from .optim import make_optimizer


@dataclass
class Result:
    model: nn.Module
    history: list[dict] = field(default_factory=list)  # one row per epoch
    steps: list[dict] = field(default_factory=list)  # one row per log interval
    test: dict | None = None
    out: Path | None = None
    stopped: str = "done"
    best_epoch: int | None = None  # with early stopping: the epoch whose weights were kept

    @property
    def final(self) -> dict:
        return self.history[-1] if self.history else {}


@dataclass
class Run:
    """Everything a run holds between steps."""

    cfg: TrainConfig
    device: torch.device
    rank: int
    world: int
    data: Dataset
    model: nn.Module  # the model as built (inside DDP, the module; with FSDP, the sharded one)
    net: nn.Module  # what a step calls: the model, under DDP and/or torch.compile
    objective: object  # vitlib.objectives: .loss(net, images, targets) -> (loss, correct, logits)
    model_config: dict
    sharded: bool
    train_loader: object
    eval_loaders: dict
    total_steps: int
    epochs: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    ema: EMA | None
    dtype: torch.dtype | None
    scaler: torch.amp.GradScaler
    mixer: object
    result: Result
    logs: MetricsLog
    out: Path | None
    ckpt_path: Path | None
    start_epoch: int = 0
    start_step: int = 0
    start_sums: list | None = None  # the epoch's loss sum, correct and count up to a mid-epoch checkpoint
    best: dict = field(default_factory=dict)  # early stopping: score, epoch, weights of the best evaluation so far
    lock: RunLock | None = None  # out/.lock while the run holds its folder
    config_changes: list = field(default_factory=list)  # options changed on resume (allow_change), oldest first

    @property
    def steps_per_epoch(self) -> int:
        return len(self.train_loader)

    @property
    def final_model(self) -> nn.Module:
        """What is evaluated and saved: the EMA of the weights when there is one."""
        return self.ema.module if self.ema else self.model


def output_paths(cfg: TrainConfig) -> tuple[Path | None, Path | None]:
    """(out folder, checkpoint path); refuses to overwrite a run's checkpoint unless it resumes it."""
    out = Path(cfg.out).expanduser() if cfg.out else None
    if out is not None:
        check_folder(out)
    ckpt_path = out / "checkpoint.safetensors" if out else None
    if ckpt_path is not None and ckpt_path.exists() and not cfg.resume:
        raise FileExistsError(
            f"{ckpt_path} already exists: pass resume=True (--resume) to continue that run, or choose "
            f"another output folder. Nothing was overwritten."
        )
    if cfg.resume and not ckpt_path.exists():
        raise FileNotFoundError(f"resume asked for, but there is no checkpoint at {ckpt_path}.")
    return out, ckpt_path


def _device(cfg: TrainConfig, world: int, local_rank: int) -> torch.device:
    device = resolve_device(cfg.device)
    if device.type == "cuda" and world > 1:
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    return device


def _dataset(cfg: TrainConfig) -> Dataset:
    return get_dataset(
        cfg.dataset,
        root=cfg.data_root,
        download=cfg.download,
        val_fraction=cfg.val_fraction,
        subset=cfg.subset,
        image_size=cfg.image_size,
        seed=cfg.seed,
    )


def _loaders(cfg: TrainConfig, data: Dataset, device: torch.device, rank: int, world: int):
    """(the training loader, {'val': ..., 'test': ...} for the splits there are)."""
    train = make_loader(data.train, data, cfg, True, device, rank, world)
    splits = (("val", data.val), ("test", data.test))
    return train, {
        name: make_loader(split, data, cfg, False, device, rank, world) for name, split in splits if split is not None
    }


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


def _schedule_lengths(cfg: TrainConfig, steps_per_epoch: int, train_size: int) -> tuple[int, int, int]:
    """(total steps, epochs, warm-up steps); with a step budget the last epoch may stop part-way."""
    if steps_per_epoch == 0:
        raise ValueError(
            f"the training set ({train_size} images) is smaller than one batch ({cfg.batch_size}): lower batch_size."
        )
    total_steps = cfg.steps or cfg.epochs * steps_per_epoch
    return total_steps, math.ceil(total_steps / steps_per_epoch), max(1, round(cfg.warmup_epochs * steps_per_epoch))


def start(cfg: TrainConfig, model: nn.Module | None = None, data: Dataset | None = None) -> Run:
    """Everything before the first step, in the order that fixes the run's random draws: seed, data, model,
    loaders, optimiser; then the checkpoint of a resumed run and the run folder's config.json. The run folder is
    checked and locked first (out/.lock, released by `train` at the end, or here if setting up fails)."""
    check_config(cfg)
    rank, world, local_rank = distributed.setup()
    device = _device(cfg, world, local_rank)
    if cfg.out:
        check_folder(Path(cfg.out).expanduser())  # before the lock creates it
    lock = _lock(Path(cfg.out).expanduser() if cfg.out else None, rank, world)
    try:
        out, ckpt_path = output_paths(cfg)  # in a folder this run holds
        run = _start(cfg, model, data, rank, world, device, out, ckpt_path)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    run.lock = lock
    return run


def _lock(out: Path | None, rank: int, world: int) -> RunLock | None:
    """Rank 0 takes out/.lock and clears the temporaries of killed runs; every process learns whether it could."""
    if out is None:
        return None
    lock, error = None, None
    if rank == 0:
        try:
            lock = RunLock(out).acquire()
            remove_stale_temporaries(out)
        except RunFolderError as err:
            error = str(err)
    if world > 1:
        shared = [error]
        distributed.broadcast_object(shared)
        error = shared[0]
    if error is not None:
        raise RunFolderError(error)
    return lock


def _check_resume(cfg: TrainConfig, ckpt_path: Path, rank: int = 0) -> list:
    """Before any work: the options of the checkpoint's run and this one's must be the same, but for the session
    options (where and how it runs) and those named in allow_change. Returns the changes so far, this one last."""
    _, meta = read_checkpoint(ckpt_path, tensors=False)
    saved, history = meta.get("config"), list(meta.get("config_changes", []))
    if not saved:
        return history
    refused, allowed = resume_differences(saved, cfg)
    if refused:
        names = ", ".join(f"{k} {old!r} (checkpoint) vs {new!r} (now)" for k, (old, new) in refused.items())
        changeable = [k for k in refused if k in CHANGEABLE_OPTIONS]
        how = (
            f" To change {', '.join(changeable)} on purpose, add --allow-change {','.join(changeable)}."
            if changeable
            else ""
        )
        model = sorted(set(refused) & {"model", "objective", "image_size", "pos_embed", "pool", "head", "dataset"})
        whose = "for another model or data set" if model else "by a run with other options"
        raise ResumeMismatchError(
            f"{ckpt_path} was written {whose}: {names}. Resuming with other options "
            f"would mix two runs. Resume with the checkpoint's options (drop these options or give its values), or "
            f"start a new run in another out folder.{how} Nothing was changed."
        )
    if allowed:
        step = meta.get("progress", {}).get("global_step")
        history.append({"at_step": step, "changes": {k: list(v) for k, v in allowed.items()}})
        if rank == 0:
            changes = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in allowed.items())
            say(
                f"resuming {ckpt_path} at step {step} with {changes} (allow_change); the learning-rate schedule "
                f"follows the new length. config.json and the checkpoints record the change."
            )
    unused = sorted(set(allowed_changes(cfg)) & set(CHANGEABLE_OPTIONS) - set(allowed))
    if unused and rank == 0:
        say(f"allow_change names {', '.join(unused)}, which the checkpoint's run already has: nothing changes.")
    return history


class ResumeMismatchError(CheckpointError):
    """A resumed run whose options differ from those of the run that wrote the checkpoint."""


def _start(cfg, model, data, rank, world, device, out, ckpt_path) -> Run:
    changes = _check_resume(cfg, ckpt_path, rank) if cfg.resume else []
    torch.manual_seed(cfg.seed)
    data = data or _dataset(cfg)
    check_finite_images(data)
    if cfg.patience and data.val is None:
        raise ValueError(
            "patience (early stopping) chooses the weights on the validation split, and this data set has "
            "none: set val_fraction > 0 (the test set must not choose anything)."
        )
    model = _model(cfg, model, data, device)
    config = model_config(model, cfg.objective)
    sharded = cfg.fsdp and world > 1  # FSDP instead of DDP; the optimiser below then holds the shards
    if cfg.fsdp:
        distributed.shard_model(model, device, world)
    train_loader, eval_loaders = _loaders(cfg, data, device, rank, world)
    total_steps, epochs, warmup_steps = _schedule_lengths(cfg, len(train_loader), len(data.train))
    optimizer, scheduler = make_optimizer(model, cfg, device, total_steps, warmup_steps)
    ema = EMA(model, cfg.ema) if cfg.ema > 0 else None
    dtype = autocast_dtype(cfg.precision, device)
    net = distributed.data_parallel(model, device) if world > 1 and not sharded else model
    result = Result(model=model, out=out)
    run = Run(
        cfg,
        device,
        rank,
        world,
        data,
        model,
        torch.compile(net) if cfg.compile else net,
        get_objective(cfg.objective, cfg.label_smoothing),
        config,
        sharded,
        train_loader,
        eval_loaders,
        total_steps,
        epochs,
        optimizer,
        scheduler,
        ema,
        dtype,
        torch.amp.GradScaler(device.type, enabled=dtype == torch.float16),
        make_mixer(cfg.mixup, cfg.cutmix, data.num_classes),
        result,
        MetricsLog(out if rank == 0 else None, result.steps, result.history),
        out,
        ckpt_path,
    )
    run.config_changes = changes
    if cfg.resume:
        _resume(run)
    if out is not None and rank == 0:
        _write_config(run)
    return run


def _resume(run: Run) -> None:
    meta = load_checkpoint(
        run.ckpt_path,
        run.model,
        run.optimizer,
        run.scheduler,
        run.ema,
        model_config=run.model_config,
        sharded=run.sharded,
    )
    progress = meta["progress"]
    run.start_epoch, run.start_step, run.start_sums = progress["epoch"], progress["step_in_epoch"], progress.get("sums")
    run.result.history[:], run.result.steps[:] = meta.get("history", []), meta.get("steps", [])


def _write_config(run: Run) -> None:
    run.out.mkdir(parents=True, exist_ok=True)
    parallel = "fsdp" if run.sharded else "ddp" if run.world > 1 else "none"
    info = {
        "train": dataclasses.asdict(run.cfg),
        "model": run.model_config,
        "data": repr(run.data),
        "vitlib": __version__,
        "torch": torch.__version__,
        "processes": run.world,
        "parallel": parallel,
    }
    if run.config_changes:  # resumed with other epochs, steps, ...: what the run had before (train: the options now)
        info["config_changes"] = run.config_changes
    (run.out / "config.json").write_text(json.dumps(info, indent=2))
