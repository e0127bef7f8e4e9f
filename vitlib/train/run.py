"""Starting a run: the run folder (checked, then locked), a resumed run's options against its checkpoint's, the
pieces of the run built from its options in one pass (`vitlib.train.factory.build_run`), then the checkpoint's state
restored and the run folder's config.json written. `start` returns the `Run` the loop (`vitlib.train.loop`) steps.

The options go one way: `train` (loop) -> `start` (here) -> `build_run` (factory), which builds and returns."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import nn

from .._version import __version__
from ..data import Dataset
from ..utils import write_json
from . import distributed
from .checkpoint import CheckpointError, load_checkpoint, read_checkpoint
from .config import CHANGEABLE_OPTIONS, TrainConfig, allowed_changes, check_config, resume_differences
from .factory import Run, build_run
from .folder import RunFolderError, RunLock, check_folder, remove_stale_temporaries, say


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


def start(cfg: TrainConfig, model: nn.Module | None = None, data: Dataset | None = None) -> Run:
    """Everything before the first step: the options checked, the processes and device, the run folder checked and
    locked (out/.lock, released by `train` at the end, or here if setting up fails), a resumed run's options compared
    with its checkpoint's; then the run built (`build_run`: seed, data, model, loaders, optimiser, in the order that
    fixes the run's random draws), the checkpoint of a resumed run restored and config.json written."""
    check_config(cfg)
    rank, world, device = distributed.setup(cfg.device)
    if cfg.out:
        check_folder(Path(cfg.out).expanduser())  # before the lock creates it
    lock = _lock(Path(cfg.out).expanduser() if cfg.out else None, rank, world)
    try:
        out, ckpt_path = output_paths(cfg)  # in a folder this run holds
        changes = _check_resume(cfg, ckpt_path, rank) if cfg.resume else []
        run = build_run(cfg, model, data, device=device, rank=rank, world=world, out=out, ckpt_path=ckpt_path)
        run.config_changes = changes
        if cfg.resume:
            _resume(run)
        if out is not None and rank == 0:
            _write_config(run)
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
    write_json(run.out / "config.json", info, indent=2)
