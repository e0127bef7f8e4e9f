"""A TrainConfig becomes a `Run` in one pass (`build_run`): the processes and device, the run folder checked once and
locked, a resumed run's options compared with its checkpoint's, then every piece built from the options in the
order that fixes the run's random draws (`vitlib.train.factory`), the checkpoint's state loaded into them and
config.json written. The Run is frozen: the loop (`vitlib.train.loop`) steps its model and optimiser, appends to its
history, and never changes what it is.

The options go one way: train (loop) -> build_run (here) -> the builders (factory, folder, checkpoint), which return."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from .._version import __version__
from ..data import Dataset
from ..utils import write_json
from . import distributed, factory
from .checkpoint import CheckpointError, load_checkpoint, read_checkpoint
from .config import CHANGEABLE_OPTIONS, TrainConfig, allowed_changes, resume_differences
from .ema import EMA
from .folder import RunFolderError, RunLock, check_folder, remove_stale_temporaries, say
from .metrics import MetricsLog


class ResumeMismatchError(CheckpointError):
    """A resumed run whose options differ from those of the run that wrote the checkpoint."""


@dataclass(frozen=True)
class Start:
    """Where a run starts: epoch, step in that epoch, the epoch's running sums so far (a mid-epoch checkpoint)."""

    epoch: int = 0
    step: int = 0
    sums: list | None = None


@dataclass(frozen=True, kw_only=True)
class Run:
    """Everything a run is, built once by `build_run`."""

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
    logs: MetricsLog  # the rows so far (logs.history, logs.steps), in memory and in the run folder
    out: Path | None
    ckpt_path: Path | None
    lock: RunLock | None  # out/.lock while the run holds its folder
    start: Start = Start()
    config_changes: list = field(default_factory=list)  # options changed on resume (allow_change), oldest first

    @property
    def steps_per_epoch(self) -> int:
        return len(self.train_loader)

    @property
    def final_model(self) -> nn.Module:
        """What is evaluated and saved: the EMA of the weights when there is one."""
        return self.ema.module if self.ema else self.model


def build_run(cfg: TrainConfig, model: nn.Module | None = None, data: Dataset | None = None) -> Run:
    """Everything before the first step (`cfg` was checked when it was made): the run folder held (out/.lock,
    released by the loop at the end, or here when setting up fails), then the run built; `model` / `data`: given
    instead of built."""
    rank, world, device = distributed.setup(cfg.device)
    out = Path(cfg.out).expanduser() if cfg.out else None
    ckpt_path = out / "checkpoint.safetensors" if out else None
    lock = _hold(out, ckpt_path, cfg.resume, rank, world)
    try:
        meta = _resume_meta(cfg, ckpt_path, rank) if cfg.resume else {}
        parts = factory.build_parts(cfg, model, data, device, rank, world)
        history, steps, start = [], [], Start()
        if cfg.resume:
            model, opt, sched, ema = parts["model"], parts["optimizer"], parts["scheduler"], parts["ema"]
            loaded = load_checkpoint(ckpt_path, model, opt, sched, ema, parts["model_config"], parts["sharded"])
            progress = loaded["progress"]
            start = Start(progress["epoch"], progress["step_in_epoch"], progress.get("sums"))
            history, steps = list(loaded.get("history", [])), list(loaded.get("steps", []))
        logs = MetricsLog(out if rank == 0 else None, steps, history)
        run = Run(**parts, cfg=cfg, device=device, rank=rank, world=world, logs=logs, out=out, ckpt_path=ckpt_path,
                  lock=lock, start=start, config_changes=meta.get("changes", []))  # fmt: skip
        if out is not None and rank == 0:
            _write_config(run)
        return run
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _hold(out: Path | None, ckpt_path: Path | None, resume: bool, rank: int, world: int) -> RunLock | None:
    """The run folder checked (a folder that can be written), taken by rank 0 (out/.lock, the temporaries of killed
    runs cleared), and its checkpoint: never overwritten unless the run resumes it."""
    if out is None:
        return None
    lock, error = None, None
    if rank == 0:
        try:
            check_folder(out)
            lock = RunLock(out).acquire()
            remove_stale_temporaries(out)
            if ckpt_path.exists() and not resume:
                raise FileExistsError(
                    f"{ckpt_path} already exists: pass resume=True (--resume) to continue that run, or choose "
                    f"another output folder. Nothing was overwritten."
                )
            if resume and not ckpt_path.exists():
                raise FileNotFoundError(f"resume asked for, but there is no checkpoint at {ckpt_path}.")
        except (RunFolderError, FileExistsError, FileNotFoundError) as err:
            error = err
            if lock is not None:
                lock.release()
    if world > 1:  # every process learns whether rank 0 could take the folder
        shared = [None if error is None else str(error)]
        distributed.broadcast_object(shared)
        if shared[0] is not None and error is None:
            error = RunFolderError(shared[0])
    if error is not None:
        raise error
    return lock


def _resume_meta(cfg: TrainConfig, ckpt_path: Path, rank: int = 0) -> dict:
    """Before any work: the options of the checkpoint's run and this one's must be the same, but for the session
    options (where and how it runs) and those named in allow_change. Returns {'changes': the changes so far}."""
    _, meta = read_checkpoint(ckpt_path, tensors=False)
    saved, history = meta.get("config"), list(meta.get("config_changes", []))
    if not saved:
        return {"changes": history}
    refused, allowed = resume_differences(saved, cfg)
    if refused:
        names = ", ".join(f"{k} {old!r} (checkpoint) vs {new!r} (now)" for k, (old, new) in refused.items())
        changeable = [k for k in refused if k in CHANGEABLE_OPTIONS]
        how = f" To change {', '.join(changeable)} on purpose, add --allow-change {','.join(changeable)}."
        model = sorted(set(refused) & {"model", "objective", "image_size", "pos_embed", "pool", "head", "dataset"})
        whose = "for another model or data set" if model else "by a run with other options"
        raise ResumeMismatchError(
            f"{ckpt_path} was written {whose}: {names}. Resuming with other options would mix two runs. Resume "
            f"with the checkpoint's options (drop these options or give its values), or start a new run in another "
            f"out folder.{how if changeable else ''} Nothing was changed."
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
    return {"changes": history}


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
    write_json(run.out / "config.json", info, indent=2)
