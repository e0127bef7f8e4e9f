"""Self-supervised pre-training (section 4.6) in one call: `vitlib.train.train` with an objective that returns its
own loss (`MaskedPatchPrediction`, `MAE`) — the same loop, optimiser (AdamW, linear warm-up, decay, clipping at
global norm 1), checkpoints and `torchrun` as supervised training; labels are never looked at. Then fine-tune the
ViT inside the objective with `vitlib.train`.

    history = pretrain(MAE(vit), data, TrainConfig(epochs=10, batch_size=256, lr=1.5e-3, progress=False))

With `patience` in the config, the run stops when the objective's loss on `data.val` (the same hidden patches at
every evaluation) has stopped falling — the course's plateau rule, as for supervised runs — and the objective keeps
the weights of its best evaluation.

`class_subset` makes the tasks of a transfer: pre-train on some classes, fine-tune on the others (notebooks 12, 15, 16).
`preset_table` lists vitlib.train's named recipes (notebook 16).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from vitlib.data import Dataset, TensorSplit, check_in_memory
from vitlib.objectives import objective_name
from vitlib.train import TrainConfig, train
from vitlib.train.presets import PRESETS

from .runs import stop_reason


def pretrain(objective: nn.Module, data: Dataset, cfg: TrainConfig) -> list[dict]:
    """Minimise objective(images) -> (loss, ...) over data.train with cfg's recipe (epochs or steps, batch, AdamW,
    warm-up and decay, clipping, augmentation, seed, device, progress, ...); returns one row per epoch (loss, time_s).

    Without cfg.patience nothing is evaluated: a pre-training loss only, for every epoch of the budget. With it, each
    row also has the validation loss (`val_loss`, every cfg.eval_every epochs), the run ends on a plateau of it, and
    the last row says why the run ended (`stopped`: 'plateau' or 'budget') and which epoch's weights the objective
    now holds (`best_epoch`)."""
    kind = objective_name(objective)
    if kind == "classify":
        raise TypeError(
            f"pretrain takes a self-supervised objective (vitlib.objectives.MAE or "
            f"MaskedPatchPrediction), got {type(objective).__name__}; train a classifier with "
            f"vitlib.train.train."
        )
    watch = bool(cfg.patience)
    if watch and data.val is None:
        raise ValueError(
            "pretrain with patience stops when the objective's loss on data.val stops falling, but this data set has "
            "no validation split: give it one (vitlib.data.get_dataset(..., val_fraction=0.1)), or set patience=0 "
            "for a fixed number of epochs."
        )
    run_cfg = dataclasses.replace(cfg, objective=kind, eval_every=cfg.eval_every if watch else 0, eval_test=False)
    return pretrain_rows(train(run_cfg, model=objective, data=data), watched=watch)


def pretrain_rows(result, watched: bool) -> list[dict]:
    """A pre-training's rows from `vitlib.train.train`'s result: per epoch its training loss (`loss`), `time_s` and,
    when evaluated, `val_loss` and `val_acc`; with `watched` (a run that stops on a plateau) the last row also says
    why it ended (`stopped`) and which epoch's weights it kept (`best_epoch`). For supervised pre-training too."""
    keys = {"epoch": "epoch", "train_loss": "loss", "time_s": "time_s", "val_loss": "val_loss", "val_acc": "val_acc"}
    rows = [{new: r[old] for old, new in keys.items() if old in r} for r in result.history]
    if watched:
        rows[-1].update(stopped=stop_reason(result), best_epoch=result.best_epoch or rows[-1]["epoch"])
    return rows


def class_subset(data: Dataset, classes) -> Dataset:
    """`data` with only the images of `classes` (in every split), relabelled 0..k-1 in the order given: a task of
    its own, e.g. to pre-train on five Fashion-MNIST classes and transfer to the other five."""
    check_in_memory(data, "class_subset")
    classes = [int(c) for c in classes]
    if not classes or len(set(classes)) != len(classes) or not all(0 <= c < data.num_classes for c in classes):
        raise ValueError(f"classes must be distinct class indices in 0..{data.num_classes - 1}, got {classes}.")
    relabel = torch.full((data.num_classes,), -1, dtype=torch.long)
    relabel[classes] = torch.arange(len(classes))

    def keep(split):
        if split is None:
            return None
        idx = torch.nonzero(relabel[split.labels] >= 0).flatten()
        return TensorSplit(split.images[idx], relabel[split.labels[idx]])

    return dataclasses.replace(
        data,
        train=keep(data.train),
        val=keep(data.val),
        test=keep(data.test),
        classes=tuple(data.classes[c] for c in classes),
        info={**data.info, "classes_of": data.name, "class_indices": classes},
    )


def preset_table() -> list[dict]:
    """One row per preset of vitlib.train.presets: name, hardware, model, data set, objective, epochs, batch, lr and
    what was measured with it."""
    return [
        {
            "preset": p.name,
            "hardware": p.hardware,
            "model": p.options.get("model"),
            "dataset": p.options.get("dataset"),
            "objective": p.options.get("objective", "classify"),
            "epochs": p.options.get("epochs"),
            "batch": p.options.get("batch_size"),
            "lr": p.options.get("lr"),
            "measured": p.measured,
        }
        for p in PRESETS.values()
    ]
