"""The metrics a run keeps: one row per log interval and one per epoch, in memory, as CSV files in the run folder
(written atomically), and in TensorBoard when it is installed."""

from __future__ import annotations

from pathlib import Path

from ..utils import write_csv


class MetricsLog:
    """Rows of metrics; `out` None keeps them in memory only (a process other than rank 0, or a run without out=)."""

    def __init__(self, out: Path | None, steps: list[dict], history: list[dict]):
        self.out, self.steps, self.history, self.tb = out, steps, history, None
        if out is not None:
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
        """metrics.csv (per epoch) and steps.csv (per log interval) in the run folder."""
        if self.out is None:
            return
        for name, rows in (("metrics.csv", self.history), ("steps.csv", self.steps)):
            if rows:
                write_csv(self.out / name, rows)
