"""One training loop for ViT, the hybrid and the CNN baselines, from a 2-core CPU to several GPUs (torchrun + DDP, or
FSDP2 with --fsdp), with the paper's recipe (section 3, appendix B.1): Adam(W), linear warm-up then cosine or linear
decay, clipping at global norm 1. On a CPU a resumed run ends with the weights of an uninterrupted one, bit for bit."""

from __future__ import annotations

import dataclasses
import math
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from .._version import __version__
from ..data import batch_seed
from ..utils import Stopped, stop_signals, write_json
from . import distributed
from .checkpoint import gather_full_state, save_checkpoint, save_model
from .config import TrainConfig
from .metrics import close_bar, evaluate, progress_bar
from .run import Run, build_run

NO_STEP = 2**62  # bad_step while every loss is finite


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class Result:
    """What `train` returns: the final model (the best one with early stopping), the rows and the test result."""

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


def train(cfg: TrainConfig, model: nn.Module | None = None, data=None) -> Result:
    """Train cfg.model (or `model`) on cfg.dataset (or `data`): the model, the metrics and the test result."""
    with build_run(cfg, model, data) as run, stop_signals() as signals:  # the folder is unlocked also after an error
        timer, best, stopped = time.perf_counter(), {}, "done"  # best: early stopping's best evaluation so far
        # one bar for the whole run (one per epoch would leave a line per epoch in a saved notebook)
        bar = progress_bar(
            total=run.total_steps,
            initial=run.start_epoch * run.steps_per_epoch + run.start_step,
            desc=f"epoch {run.start_epoch + 1}/{run.epochs}",
            disable=not (cfg.progress and run.rank == 0),
            dynamic_ncols=True,
            unit="step",
        )
        for epoch in range(run.start_epoch, run.epochs):
            sums, bad_step, stop = train_epoch(run, epoch, timer, bar, signals)
            if stop is not None:  # the time budget ran out (or a signal came) part-way through the epoch
                close_bar(bar)
                checkpoint(run, *stop, sums, bad_step)
                stop_if_signalled(run, signals, *stop)
                stopped = f"time budget of {cfg.time_budget} min reached at epoch {stop[0] + 1}, step {stop[1]}"
                if cfg.progress and run.rank == 0:
                    where = f"; checkpoint in {run.ckpt_path} (continue with resume)" if run.ckpt_path else ""
                    print(stopped + where)
                break
            ended = end_epoch(run, epoch, sums, timer, best)
            stop_if_signalled(run, signals, epoch + 1, 0)
            if ended:
                stopped = f"early stopping after epoch {epoch + 1}: best at epoch {best['epoch']}"
                if cfg.schedule == "plateau":
                    stopped += f", after {best.get('drops', 0)} tenfold drop(s) of the rate"
                break
        close_bar(bar)
        return finish(run, best, stopped)


def train_epoch(run: Run, epoch: int, timer: float, bar, signals: list):
    """One epoch: its (loss sum, correct, count), the first non-finite step, and (epoch, step) if it stops early."""
    cfg, resumed = run.cfg, epoch == run.start_epoch
    first = run.start_step if resumed else 0
    run.net.train()
    sums = torch.zeros(3, device=run.device, dtype=torch.float64)  # loss sum, correct, count: no sync per step
    if resumed and run.start_sums and run.rank == 0:  # resumed mid-epoch: the steps before count
        sums += torch.tensor(run.start_sums, device=run.device, dtype=torch.float64)
    bad_step = torch.full((), NO_STEP, device=run.device, dtype=torch.long)  # the first step with a non-finite loss
    bar.set_description(f"epoch {epoch + 1}/{run.epochs}", refresh=False)
    log = {"time": time.perf_counter(), "images": 0}
    for i, (images, labels) in enumerate(run.train_loader.epoch(epoch, first), start=first):
        step = epoch * run.steps_per_epoch + i
        loss, correct = train_step(run, images, labels, epoch, i)
        with torch.no_grad():  # no host-device copy or sync in the step: scalars go in as kernel arguments
            sums[0] += loss.detach().double() * len(labels)
            if correct is not None:
                sums[1] += correct.double()
            sums[2] += len(labels)
            bad_step = torch.where((bad_step == NO_STEP) & ~torch.isfinite(loss.detach()), step, bad_step)
        log["images"] += len(labels) * run.world
        last = i + 1 == run.steps_per_epoch or step + 1 == run.total_steps
        if (i + 1) % cfg.log_every == 0 or last:
            log_interval(run, epoch, i, sums, bad_step, log, bar)
        bar.update(1)
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and not last:
            checkpoint(run, epoch, i + 1, sums, bad_step)
        if cfg.time_budget and not last and distributed.past(timer, cfg.time_budget, run.device):
            return sums, bad_step, (epoch, i + 1)
        if not last and distributed.any_flag(bool(signals), run.device, (i + 1) % cfg.log_every == 0):
            return sums, bad_step, (epoch, i + 1)
        if last:
            break
    return sums, bad_step, None


def train_step(run: Run, images: torch.Tensor, labels: torch.Tensor, epoch: int, i: int):
    """One optimizer step (mixup, autocast, backward, clipping, AdamW, schedule, EMA): (loss, correct or None)."""
    cfg, targets = run.cfg, labels
    if run.mixer is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(batch_seed(cfg.seed + 1, epoch, i))
            images, targets = run.mixer(images, labels)
    if cfg.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    if run.objective.random_masks:  # which patches are hidden depends on (seed, epoch, step) only: resumable
        torch.manual_seed(batch_seed(cfg.seed + 2, epoch, i))
    with torch.autocast(run.device.type, dtype=run.dtype, enabled=run.dtype is not None):
        loss, correct, _ = run.objective.loss(run.net, images, targets)
    run.optimizer.zero_grad(set_to_none=True)
    run.scaler.scale(loss).backward()
    if cfg.grad_clip > 0:
        run.scaler.unscale_(run.optimizer)
        nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.scheduler.step()
    if run.ema is not None:
        run.ema.update_parameters(run.model)
    return loss, correct


def log_interval(run: Run, epoch: int, i: int, sums, bad_step, log: dict, bar) -> None:
    """A row of the step log (running loss and accuracy, lr, images per second): the loop's only host-device sync."""
    check_finite(run, bad_step, epoch)
    loss_sum, correct, count = sums.tolist()
    ips = log["images"] / (time.perf_counter() - log["time"])
    row = {
        "step": epoch * run.steps_per_epoch + i + 1,
        "epoch": epoch + (i + 1) / run.steps_per_epoch,
        "loss": loss_sum / count,
        "acc": correct / count,
        "lr": run.scheduler.get_last_lr()[0],
        "images_per_s": ips,
    }
    if not run.objective.has_accuracy:
        del row["acc"]
    run.logs.step(row)
    bar.set_postfix(
        loss=f"{row['loss']:.3f}", acc=f"{row.get('acc', float('nan')):.3f}", img_s=f"{ips:.0f}", refresh=False
    )
    log["time"], log["images"] = time.perf_counter(), 0


def end_epoch(run: Run, epoch: int, sums: torch.Tensor, timer: float, best: dict) -> bool:
    """The epoch's row (evaluated when due) and checkpoint; returns whether early stopping ends the run here."""
    own = sums.clone()  # this process's share, for a checkpoint if the evaluation fails
    if dist.is_initialized():
        dist.all_reduce(sums)
    loss_sum, correct, count = sums.tolist()
    row = {
        "epoch": epoch + 1,
        "step": min((epoch + 1) * run.steps_per_epoch, run.total_steps),
        "train_loss": loss_sum / max(count, 1),
        "train_acc": correct / max(count, 1),
        "lr": run.scheduler.get_last_lr()[0],
        "time_s": time.perf_counter() - timer,
    }
    if not run.objective.has_accuracy:
        del row["train_acc"]
    split = "val" if "val" in run.eval_loaders else "test"  # without a validation split, watch the test set
    every = run.cfg.eval_every
    if split in run.eval_loaders and every and ((epoch + 1) % every == 0 or epoch + 1 == run.epochs):
        try:
            ev = _evaluate(run, run.eval_loaders[split])
        except Exception:  # e.g. an unreadable image: the epoch's training is kept, --resume evaluates it again
            if not dist.is_initialized():
                checkpoint(run, epoch, run.steps_per_epoch, own)
            raise
        check_finite_eval(run, split, ev, epoch)
        row.update({f"{split}_{k}": ev[k] for k in ("loss", "acc") if k in ev})
        score = ev["acc"] if "acc" in ev else -ev["loss"]  # early stopping keeps the weights of the best so far
        if run.cfg.patience and split == "val" and (not best or score > best["score"]):
            weights = {k: v.detach().clone() for k, v in run.final_model.state_dict().items()}
            best.update(score=score, epoch=epoch + 1, weights=weights)
    run.logs.history.append(row)  # checkpoint first, then metrics.csv: the files never run ahead of the checkpoint
    if run.cfg.progress and run.rank == 0 and f"{split}_loss" in row:
        acc = lambda key: f" acc {row[key]:.4f}" if key in row else ""  # noqa: E731
        print(
            f"epoch {epoch + 1}: train loss {row['train_loss']:.4f}{acc('train_acc')} | "
            f"{split} loss {row[f'{split}_loss']:.4f}{acc(f'{split}_acc')} | {row['time_s']:.0f} s"
        )
    checkpoint(run, epoch + 1, 0)
    run.logs.epoch(row, append=False)
    # whether the validation score has not improved for `patience` evaluations: `plateau_stop` in epochs
    return plateau_stop(best, epoch + 1, run.cfg.patience * run.cfg.eval_every, run.cfg, run.optimizer, run.scheduler)


def plateau_stop(best: dict, at: int, span: int, cfg: TrainConfig, optimizer, scheduler) -> bool:
    """Whether the score has not improved for `span` since best['epoch'] or the last drop of the rate. With schedule
    plateau a stall first lowers the rate tenfold (cfg.lr_drops times) and the run goes on."""
    if not best or at - max(best["epoch"], best.get("dropped_at", 0)) < span:  # best empty: nothing evaluated yet
        return False
    drops = best.get("drops", 0)
    if cfg.schedule == "plateau" and drops < cfg.lr_drops:
        scheduler.base_lrs = [lr * 0.1 for lr in scheduler.base_lrs]  # kept in the scheduler's state
        for group in optimizer.param_groups:  # from the next step on, not one step later
            group["lr"] *= 0.1
        best.update(drops=drops + 1, dropped_at=at)
        return False
    return True


def _evaluate(run: Run, loader) -> dict:
    if run.sharded:
        distributed.sync_buffers(run.model)
    return evaluate(run.final_model, loader, run.dtype)


def finish(run: Run, best: dict, stopped: str) -> Result:
    """After the last epoch: the test set (unless the time budget stopped the run), then out/model.safetensors."""
    run.logs.flush()
    if best:  # early stopping: test and save the best weights, not the last
        run.final_model.load_state_dict(best["weights"])
    test = None
    if run.cfg.eval_test and "test" in run.eval_loaders and not stopped.startswith("time budget"):
        test = _evaluate(run, run.eval_loaders["test"])
        check_finite_eval(run, "test", test, run.epochs - 1)
        if run.out is not None and run.rank == 0:
            write_json(run.out / "test.json", test, indent=2)
    if run.out is not None:
        save_model(run.final_model, run.out, run.model_config, sharded=run.sharded, rank=run.rank)
    return Result(run.final_model, run.logs.history, run.logs.steps, test, run.out, stopped, best.get("epoch"))


def check_finite(run: Run, bad_step: torch.Tensor, epoch: int) -> None:
    """Raise if a loss so far was NaN or infinite (a sync; under DDP every process raises together)."""
    if dist.is_initialized():
        dist.all_reduce(bad_step, op=dist.ReduceOp.MIN)
    if int(bad_step) < NO_STEP:
        path = run.ckpt_path
        where = f"the last good checkpoint is {path}" if path and path.exists() else "no checkpoint was written"
        raise NonFiniteLossError(
            f"the loss became non-finite at step {int(bad_step) + 1} (epoch {epoch + 1}); "
            f"{where}. Lower lr, raise warmup_epochs or keep grad_clip on."
        )


def check_finite_eval(run: Run, split: str, ev: dict, epoch: int) -> None:
    """A NaN or infinite validation or test loss ends the run as a non-finite training loss does."""
    if not math.isfinite(ev["loss"]):
        where = f"; the last good checkpoint is {run.ckpt_path}" if run.ckpt_path and run.ckpt_path.exists() else ""
        raise NonFiniteLossError(
            f"the {split} loss is {ev['loss']} after epoch {epoch + 1}: the weights no longer give finite logits "
            f"(try precision fp32, a lower lr or grad_clip on){where}."
        )


def stop_if_signalled(run: Run, signals: list, epoch: int, step_in_epoch: int) -> None:
    """Raise `Stopped` (exit code 128 + the signal) if a signal came; the checkpoint was just written."""
    if distributed.any_flag(bool(signals), run.device, sync=True):  # under DDP: whichever process got it
        step, signum = epoch * run.steps_per_epoch + step_in_epoch, signals[0] if signals else signal.SIGTERM
        saved = f"checkpoint in {run.ckpt_path}: continue with --resume" if run.ckpt_path else "no out= folder: unsaved"
        raise Stopped(f"stopped by {signal.Signals(signum).name} at step {step}; {saved}", 128 + signum)


def checkpoint(run: Run, epoch: int, step_in_epoch: int, sums=None, bad_step=None) -> None:
    """Save the run; mid-epoch with the epoch's running sums. Only finite losses and weights are ever saved."""
    if run.ckpt_path is None:
        return
    if bad_step is not None:
        check_finite(run, bad_step, epoch)
    step = epoch * run.steps_per_epoch + step_in_epoch
    if not distributed.all_finite(run.model, run.sharded):
        where = run.ckpt_path if run.ckpt_path.exists() else "none"
        raise NonFiniteLossError(
            f"the weights became non-finite by step {step} (epoch {epoch + 1}); the last good "
            f"checkpoint is {where}. Lower lr, raise warmup_epochs or keep grad_clip on."
        )
    if sums is not None and dist.is_initialized():
        sums = sums.clone()
        dist.all_reduce(sums)  # rank 0 keeps every process's share; on resume the others start from zero
    gathered = gather_full_state(run.model, run.optimizer) if run.sharded else None  # every process takes part
    if run.rank != 0:
        return
    sums = None if sums is None else sums.tolist()
    progress = dict(epoch=epoch, step_in_epoch=step_in_epoch, global_step=step, sums=sums)
    meta = {
        "model_config": run.model_config,
        "config": dataclasses.asdict(run.cfg),
        "history": run.logs.history,
        "steps": run.logs.steps,
        "vitlib": __version__,
    }
    if run.config_changes:
        meta["config_changes"] = run.config_changes
    save_checkpoint(run.ckpt_path, run.model, run.optimizer, run.scheduler, run.ema, progress, meta, gathered)
