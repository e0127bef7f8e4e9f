"""One training run as an experiment keeps it: why it stopped, the numbers kept (`train_metrics`), and the run itself
as fn(seed) (`train_run`), which `Experiment.train`, `Experiment.run` and `sweep.choose_rates` take."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from vitlib.model import count_parameters
from vitlib.train import train


def stop_reason(result) -> str:
    """Why a `vitlib.train.train` run ended: 'plateau' (its early-stopping rule ended it) or 'budget' (it ran out)."""
    return "plateau" if result.stopped.startswith("early stopping") else "budget"


def train_run(cfg, data=None, model=None) -> Callable[[int], dict]:
    """fn(seed) -> `train_metrics` of one `vitlib.train.train` run of `cfg` (its seed replaced, torch seeded first);
    `data` and `model` may be callables of the seed. `Experiment.train` runs it; pass it to `Experiment.run`."""

    def one(seed: int) -> dict:
        run_cfg = dataclasses.replace(cfg, seed=seed, out=None, progress=False)
        torch.manual_seed(seed)
        d = data(seed) if callable(data) else data
        m = model(seed) if callable(model) else model
        return train_metrics(train(run_cfg, model=m, data=d), run_cfg)

    return one


def train_metrics(result, cfg=None) -> dict:
    """The numbers of a finished `vitlib.train.train` run that an experiment keeps; given the run's `cfg` with a
    stopping rule (patience), also why it stopped: 'plateau' (the rule ended it) or 'budget' (every epoch ran)."""
    final = result.final
    out = {
        "train_acc": final.get("train_acc"),
        "train_loss": final.get("train_loss"),
        "epochs": final.get("epoch"),
        "train_time_s": final.get("time_s"),
        "params": count_parameters(result.model),
    }
    for split in ("val", "test"):
        if f"{split}_acc" in final:
            out[f"{split}_acc"] = final[f"{split}_acc"]
    if result.test:
        out["test_acc"], out["test_loss"] = result.test["acc"], result.test["loss"]
    if cfg is not None and cfg.patience:
        out["stopped"] = stop_reason(result)
    return out
