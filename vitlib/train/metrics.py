"""What a run reports: `evaluate` (mean loss and accuracy over a loader), the rows of metrics it keeps (`MetricsLog`:
in memory, as CSV files in the run folder, in TensorBoard when installed) and one progress bar for the whole run."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from ..data import batch_seed
from ..objectives import get_objective, objective_name
from ..utils import write_csv


@torch.no_grad()
def evaluate(model: nn.Module, loader, dtype: torch.dtype | None = None, return_predictions: bool = False) -> dict:
    """{'loss', 'acc' (not for MAE), 'n'} over a loader (every process calls it under DDP / FSDP), with
    return_predictions a classifier's 'predictions' and 'labels'; masks are the same at every evaluation."""
    model.eval()
    device = loader.device
    objective = get_objective(objective_name(model))
    totals = torch.zeros(3, device=device, dtype=torch.float64)  # loss sum, correct, count
    preds, labels = [], []
    for step, (images, y) in enumerate(loader.epoch(0)):
        with torch.random.fork_rng(devices=None if objective.random_masks else []):
            if objective.random_masks:
                torch.manual_seed(batch_seed(0, 0, step))
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss, correct, logits = objective.loss(model, images, y, reduction="sum")
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
    if not objective.has_accuracy:
        del out["acc"]
    if return_predictions and preds:
        out["predictions"], out["labels"] = torch.cat(preds), torch.cat(labels)
    return out


class MetricsLog:
    """Rows of metrics; `out` None keeps them in memory only (a process other than rank 0, or a run without out=)."""

    def __init__(self, out: Path | None, steps: list[dict], history: list[dict]):
        self.out, self.steps, self.history, self.tb = out, steps, history, None
        if out is not None:
            with contextlib.suppress(Exception):  # tensorboard not installed: no TensorBoard log
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(out / "tensorboard"))

    def step(self, row: dict) -> None:
        self.steps.append(row)
        self._scalars("train", row, skip=("step",))

    def epoch(self, row: dict, append: bool = True) -> None:
        if append:
            self.history.append(row)
        self._scalars("epoch", row, skip=("epoch", "step"))
        self.flush()

    def _scalars(self, group: str, row: dict, skip: tuple) -> None:
        for k, v in row.items():
            if self.tb and k not in skip:
                self.tb.add_scalar(f"{group}/{k}", v, row["step"])

    def flush(self) -> None:
        """metrics.csv (per epoch) and steps.csv (per log interval) in the run folder."""
        if self.out is None:
            return
        for name, rows in (("metrics.csv", self.history), ("steps.csv", self.steps)):
            if rows:
                write_csv(self.out / name, rows)


def progress_bar(**options) -> tqdm:
    """A tqdm bar (options as tqdm's); close it with `close_bar`. In a notebook it is displayed under a display id that
    close_bar updates: a saved notebook shows the finished bar, not the state it was first displayed in ("0/560")."""
    try:
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:  # no IPython: a text bar
        notebook_tqdm = None
    if notebook_tqdm is None or not issubclass(tqdm, notebook_tqdm) or options.get("disable"):
        return tqdm(**options)
    from IPython.display import display

    bar = tqdm(display=False, **options)
    bar.display_handle = display(bar.container, display_id=True)
    return bar


def close_bar(bar: tqdm) -> None:
    """Close the bar; in a notebook, replace its displayed output with the final state."""
    bar.close()
    handle = getattr(bar, "display_handle", None)
    if handle is not None:
        handle.update(bar.container)
