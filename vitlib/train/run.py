"""A TrainConfig becomes a frozen `Run` in one pass (`build_run`): processes and device, the run folder checked and
locked, a resumed run's options compared with its checkpoint's, every piece built (`vitlib.train.factory`), the
checkpoint loaded into them and config.json written. The loop steps its model and optimiser only."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
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
from .folder import RunFolderError, RunLock, check_folder, remove_stale_temporaries, say
from .metrics import MetricsLog
from .optim import EMA


class ResumeMismatchError(CheckpointError):
    """A resumed run whose options differ from those of the run that wrote the checkpoint."""


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
    start_epoch: int = 0  # where a resumed run starts: the epoch, the step in it, and the epoch's running sums so far
    start_step: int = 0
    start_sums: list | None = None  # (loss sum, correct, count) of the steps before start_step
    config_changes: list = field(default_factory=list)  # options changed on resume (allow_change), oldest first

    @property
    def steps_per_epoch(self) -> int:
        return len(self.train_loader)

    @property
    def final_model(self) -> nn.Module:
        """What is evaluated and saved: the EMA of the weights when there is one."""
        return self.ema.module if self.ema else self.model


@contextlib.contextmanager
def build_run(cfg: TrainConfig, model: nn.Module | None = None, data: Dataset | None = None) -> Iterator[Run]:
    """Everything before the first step; the run folder stays locked until the with block ends (also on an error)."""
    rank, world, device = distributed.setup(cfg.device)
    out = Path(cfg.out).expanduser() if cfg.out else None
    ckpt_path = out / "checkpoint.safetensors" if out else None
    lock = _hold(out, ckpt_path, cfg, rank, world)
    try:
        meta = _resume_meta(cfg, ckpt_path, rank) if cfg.resume else {}
        parts = factory.build_parts(cfg, model, data, device, rank, world)
        history, steps, start = [], [], {}
        if cfg.resume:
            model, opt, sched, ema = parts["model"], parts["optimizer"], parts["scheduler"], parts["ema"]
            loaded = load_checkpoint(ckpt_path, model, opt, sched, ema, parts["model_config"], parts["sharded"])
            at = loaded["progress"]  # epoch, step_in_epoch, and the running sums of a mid-epoch checkpoint
            start = dict(start_epoch=at["epoch"], start_step=at["step_in_epoch"], start_sums=at.get("sums"))
            history, steps = list(loaded.get("history", [])), list(loaded.get("steps", []))
        logs = MetricsLog(out if rank == 0 else None, steps, history)
        run = Run(**parts, cfg=cfg, device=device, rank=rank, world=world, logs=logs, out=out, ckpt_path=ckpt_path,
                  **start, config_changes=meta.get("changes", []))  # fmt: skip
        if out is not None and rank == 0:
            _write_config(run)
        yield run
    finally:
        if lock is not None:
            lock.release()


RESULTS = ("checkpoint.safetensors", "model.safetensors", "metrics.csv", "steps.csv", "test.json")  # a run's files


def _hold(out: Path | None, ckpt_path: Path | None, cfg: TrainConfig, rank: int, world: int) -> RunLock | None:
    """The run folder checked and locked by rank 0; its results are never overwritten unless the run resumes (or
    cfg.overwrite removes them)."""
    if out is None:
        return None
    lock, error, resume = None, None, cfg.resume
    if rank == 0:
        try:
            check_folder(out)
            lock = RunLock(out).acquire()
            remove_stale_temporaries(out)
            found = [name for name in RESULTS if (out / name).exists()]
            if cfg.overwrite and not resume:
                for name in found:
                    (out / name).unlink()
            elif found and not resume and not ckpt_path.exists():
                raise FileExistsError(
                    f"{out} holds another run's results ({', '.join(found)}) and no checkpoint to resume: pass "
                    f"overwrite=True (--overwrite) to replace them, or choose another output folder. Nothing was "
                    f"overwritten."
                )
            if ckpt_path.exists() and not resume:
                raise FileExistsError(
                    f"{ckpt_path} already exists: pass resume=True (--resume) to continue that run, overwrite=True "
                    f"(--overwrite) to start afresh, or choose another output folder. Nothing was overwritten."
                )
            if resume and not ckpt_path.exists():
                raise FileNotFoundError(f"resume asked for, but there is no checkpoint at {ckpt_path}.")
        except (RunFolderError, FileExistsError, FileNotFoundError) as err:
            error = err
            if lock is not None:
                lock.release()
    if world > 1:  # every process learns whether rank 0 could take the folder
        message = distributed.rank0_error(None if error is None else str(error))
        if message is not None and error is None:
            error = RunFolderError(message)
    if error is not None:
        raise error
    return lock


def _resume_meta(cfg: TrainConfig, ckpt_path: Path, rank: int = 0) -> dict:
    """Refuse a resume with options other than the checkpoint's; returns {'changes': the changes so far}."""
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
    info = {
        "train": dataclasses.asdict(run.cfg),
        "model": run.model_config,
        "data": repr(run.data),
        "vitlib": __version__,
        "torch": torch.__version__,
        "processes": run.world,
        "parallel": "fsdp" if run.sharded else "ddp" if run.world > 1 else "none",
    }
    if run.config_changes:  # resumed with other epochs, steps, ...: what the run had before (train: the options now)
        info["config_changes"] = run.config_changes
    write_json(run.out / "config.json", info, indent=2)
