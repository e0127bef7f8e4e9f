"""Inductive bias and data size (section 3.1 'Inductive bias', section 4.3, Fig. 3 and Fig. 4): train a ViT and a
CNN on growing stratified fractions of one training set, each to its plateau, and test what the paper says about the
CNN's built-in translation equivariance.

    data = get_dataset("fashion-mnist-mini")
    cfg = TrainConfig(batch_size=64, lr=2e-3, steps=2000, patience=5, device="cpu")  # a budget, early stopping
    sub = fraction_of(data, 0.05, seed=1)                      # 5 % of the training images, every class its share
    result = train_to_plateau(cfg, model, sub)                 # stops on the validation split

Every run trains until its validation accuracy stops improving (early stopping, the best weights kept), within a
budget of steps: the paper's Fig. 4 uses early stopping too ("we ... use early-stopping, and report the best
validation accuracy achieved during training", §4.3). With a fixed number of steps instead, the large subsets end
under-trained and the curve mixes "less data" with "less training".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from vitlib.analysis.probe import extract_features, linear_probe
from vitlib.data import Dataset, TensorSplit, check_in_memory, subset
from vitlib.model import count_parameters
from vitlib.train import TrainConfig, resolve_device, train

from .runs import stop_reason
from .stats import t_interval
from .sweep import choose_rates


def fraction_of(data: Dataset, fraction: float, seed: int = 0) -> Dataset:
    """`data` with a stratified `fraction` (0 < fraction <= 1) of its training split; val and test untouched."""
    check_in_memory(data, "fraction_of")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}.")
    if fraction == 1:
        return data
    return dataclasses.replace(data, train=subset(data.train, float(fraction), seed))


def few_shot_probe(
    model: nn.Module,
    data: Dataset,
    shots: int = 10,
    seed: int = 0,
    l2: float = 1e-2,
    device: str | torch.device = "cpu",
) -> float:
    """Linear few-shot evaluation (Fig. 4 and the few-shot results of §4.1): a linear classifier fitted on the frozen
    features of `shots` images per class of the validation split, its accuracy on the test split."""
    if data.val is None:
        raise ValueError("a few-shot probe takes its examples from the validation split: the data set has none.")
    val_x, val_y = extract_features(model, data.val, data, device=device)
    g = torch.Generator().manual_seed(seed)
    pick = []
    for c in range(data.num_classes):
        idx = torch.nonzero(val_y == c).flatten()
        if len(idx) < shots:
            raise ValueError(f"class {c} has {len(idx)} validation images, fewer than {shots} shots.")
        pick.append(idx[torch.randperm(len(idx), generator=g)[:shots]])
    pick = torch.cat(pick)
    test_x, test_y = extract_features(model, data.test, data, device=device)
    return linear_probe(val_x[pick], val_y[pick], test_x, test_y, l2=l2)["test_acc"]


@dataclass
class PlateauResult:
    model: nn.Module  # with the weights of the best validation accuracy
    test: dict  # {'loss', 'acc', 'n'} of those weights on the test split
    best_epoch: int
    best_val_acc: float
    steps: int  # optimizer steps taken (early stopping may end the run before the budget)
    epochs: float  # passes over the (sub)set that the steps amount to
    n_train: int
    time_s: float
    stopped: str = "budget"  # "plateau": early stopping ended it; "budget": it used every step of cfg.steps
    best_step: int = 0  # the optimizer step of the best validation accuracy (the weights kept)
    final_train_acc: float = float("nan")  # at the last epoch run (training mode: dropout, augmentation)
    final_val_acc: float = float("nan")  # at the last evaluation


def train_to_plateau(cfg: TrainConfig, model: nn.Module, data: Dataset, *, evaluations: int = 20) -> PlateauResult:
    """Train `model` on data.train until its validation accuracy has not improved for cfg.patience evaluations (or
    the budget of cfg.steps optimizer steps is spent), keep the best weights and test them.

    About `evaluations` evaluations are spread over the budget whatever the subset's size (a 1 % subset takes many
    epochs between two of them, the whole set a few). The recipe is cfg's (AdamW, cosine decay over the budget,
    clipping, ...), with a warm-up of 10 % of the budget (in steps, whatever the subset's size; cfg.warmup_epochs is
    not used); the batch is cfg.batch_size or the whole split when it is smaller."""
    if cfg.steps < 1 or evaluations < 1 or cfg.patience < 1:
        raise ValueError(
            f"the step budget (steps), evaluations and patience must be at least 1, got {cfg.steps}, {evaluations}, "
            f"{cfg.patience}."
        )
    if not isinstance(data.train, TensorSplit) or data.val is None:
        raise ValueError("train_to_plateau needs an in-memory training split and a validation split to stop on.")
    batch = min(cfg.batch_size, len(data.train))
    per_epoch = len(data.train) // batch
    run_cfg = dataclasses.replace(
        cfg,
        batch_size=batch,
        warmup_epochs=max(1, round(0.1 * cfg.steps)) / per_epoch,
        eval_every=max(1, round(cfg.steps / evaluations / per_epoch)),
        eval_test=True,
        out=None,
        progress=False,
    )
    started = time.perf_counter()
    result = train(run_cfg, model=model, data=data)
    last = result.history[-1]
    steps = last["step"]
    best = next(r for r in result.history if r["epoch"] == (result.best_epoch or last["epoch"]))
    evaluated = [r for r in result.history if "val_acc" in r]
    return PlateauResult(
        result.model,
        result.test,
        best["epoch"],
        best.get("val_acc", float("nan")),
        steps,
        steps * batch / len(data.train),
        len(data.train),
        time.perf_counter() - started,
        stopped=stop_reason(result),
        best_step=best["step"],
        final_train_acc=last.get("train_acc", float("nan")),
        final_val_acc=evaluated[-1]["val_acc"] if evaluated else float("nan"),
    )


def fraction_run(
    make: Callable[[int], nn.Module],
    data: Dataset,
    fraction: float,
    cfg: TrainConfig,
    *,
    shots: int = 0,
    evaluations: int = 20,
) -> Callable[[int], dict]:
    """fn(seed) -> metrics of one run: a fresh make(seed) trained to its plateau (`train_to_plateau`) on
    fraction_of(data, fraction, seed), then tested (and, with `shots`, probed: `few_shot_probe`)."""

    def one(seed: int) -> dict:
        sub = fraction_of(data, fraction, seed)
        torch.manual_seed(seed)
        model = make(seed)
        r = train_to_plateau(dataclasses.replace(cfg, seed=seed), model, sub, evaluations=evaluations)
        out = {
            "test_acc": r.test["acc"],
            "test_loss": r.test["loss"],
            "val_acc": r.best_val_acc,
            "best_epoch": r.best_epoch,
            "steps": r.steps,
            "epochs": r.epochs,
            "params": count_parameters(model),
            "time_s": r.time_s,
            "stopped": r.stopped,
            "best_step": r.best_step,
            "final_train_acc": r.final_train_acc,
            "final_val_acc": r.final_val_acc,
        }
        if shots:
            out["few_shot_acc"] = few_shot_probe(r.model, data, shots, seed, device=resolve_device(cfg.device))
        return out

    return one


def run_fractions(
    exp,
    models: dict[str, Callable[[int], nn.Module]],
    data: Dataset,
    fractions: Sequence[float],
    seeds: Iterable[int],
    cfg: TrainConfig,
    *,
    shots: int = 0,
    evaluations: int = 20,
    rates: dict[str, float | dict] | None = None,
) -> list[dict]:
    """For every model name, fraction and seed: a fresh model(seed), trained to its plateau (`train_to_plateau`, within
    cfg's budget of steps, with cfg's patience) on fraction_of(data, fraction, seed); rows go to `exp` (a
    course.experiments.Experiment) as condition '<name> <fraction:g>' with the fields model, fraction,
    n_train and lr, and the metrics test_acc, test_loss, val_acc (best), best_epoch, steps, epochs, params, time_s,
    why it stopped ('plateau' or 'budget'), best_step, final_train_acc and final_val_acc (and, with `shots`,
    few_shot_acc: a linear probe of the frozen features on `shots` validation images per class, as Fig. 4
    evaluates). `rates`: each condition's own learning rate, or `fraction_rates`' answer for it (its runs of the chosen
    rate are then kept, not trained again); else cfg.lr for all."""
    seeds = list(seeds)
    rows = []
    for name, make in models.items():
        for fraction in fractions:
            cond = condition_name(name, fraction)
            chosen = (rates or {}).get(cond, cfg.lr)
            lr, known = (chosen["best"], chosen["runs"]) if isinstance(chosen, dict) else (chosen, None)
            n_train = len(fraction_of(data, fraction, seeds[0]).train)
            one = fraction_run(
                make, data, fraction, dataclasses.replace(cfg, lr=lr), shots=shots, evaluations=evaluations
            )
            rows += exp.run(cond, one, seeds, known, model=name, fraction=fraction, n_train=n_train, lr=lr)
    return rows


def fraction_rates(
    exp,
    models: dict[str, Callable[[int], nn.Module]],
    data: Dataset,
    fractions: Sequence[float],
    cfg: TrainConfig,
    lrs: Sequence[float],
    *,
    seeds: Sequence[int] = (0,),
    shots: int = 0,
    evaluations: int = 20,
    widen: int = 2,
) -> dict[str, dict]:
    """Each (model, fraction)'s own learning rate, chosen on validation before the runs that are compared
    (`course.sweep.choose_rates` over `lrs`, widened where a best rate lies at the grid's edge); rows go to
    `exp`, kept apart from the experiment of the claims. Returns {condition name: {'best', 'lrs', 'widened',
    'bracketed', 'runs'}}: `run_fractions`'s rates (give both the same `shots` and `evaluations`)."""
    arms = {
        condition_name(name, fraction): (
            lambda lr, make=make, fraction=fraction: fraction_run(
                make, data, fraction, dataclasses.replace(cfg, lr=lr), shots=shots, evaluations=evaluations
            )
        )
        for name, make in models.items()
        for fraction in fractions
    }
    return choose_rates(exp, arms, lrs, seeds=seeds, widen=widen)


def condition_name(model: str, fraction: float) -> str:
    return f"{model} {fraction:g}"


def gaps(exp, a: str, b: str, fractions: Sequence[float], metric: str = "test_acc") -> list[dict]:
    """Per fraction: the gap mean(a) - mean(b) of `metric` with its standard error, Welch's degrees of freedom, 95%
    interval and p (`stats.t_interval`, independent seeds): {'fraction', 'gap', 'diff', 'se', 'df', 'low', ...}."""
    out = []
    for f in fractions:
        judged = t_interval(exp.values(condition_name(a, f), metric), exp.values(condition_name(b, f), metric))
        out.append({"fraction": f, "gap": judged["diff"], **judged})
    return out


# ------------------------------------------------------------------------------------ translation equivariance
def shift(images: torch.Tensor, dy: int, dx: int, circular: bool = True) -> torch.Tensor:
    """Shift images (..., H, W) down by dy and right by dx pixels, circularly (what leaves one side comes back on the
    other), so that a shift loses no pixels and equivariance can be tested exactly; circular=False: zeros shifted in,
    what leaves the image lost."""
    if circular:
        return torch.roll(images, shifts=(dy, dx), dims=(-2, -1))
    out = torch.zeros_like(images)
    h, w = images.shape[-2:]
    out[..., max(dy, 0) : h + min(dy, 0), max(dx, 0) : w + min(dx, 0)] = images[
        ..., max(-dy, 0) : h + min(-dy, 0), max(-dx, 0) : w + min(-dx, 0)
    ]
    return out


@torch.no_grad()
def equivariance_error(
    f: Callable[[torch.Tensor], torch.Tensor],
    images: torch.Tensor,
    dy: int,
    dx: int,
    stride: int = 1,
    circular: bool = True,
    border: int = 0,
    relative: bool = True,
) -> float:
    """max |f(shift(x)) - shift(f(x))| / max |f(x)|, f's output (B, C, H', W') a map with `stride` input pixels per
    cell: the output is shifted by (dy / stride, dx / stride) cells, so dy and dx must be multiples of `stride`.
    0 (up to rounding) means f is equivariant to that shift. circular=False: zeros shifted in (`shift`), and the
    cells the shift emptied left out of the comparison; `border`: that many more cells left out along every edge
    (where padding makes any map differ); relative=False: the difference itself, not divided by max |f(x)|."""
    if dy % stride or dx % stride:
        raise ValueError(
            f"a map with stride {stride} can only be compared for shifts by multiples of {stride}, got "
            f"({dy}, {dx}); compare a shift of ({dy - dy % stride}, {dx - dx % stride}) or use stride 1."
        )
    y = f(images)
    diff = f(shift(images, dy, dx, circular)) - shift(y, dy // stride, dx // stride, circular)
    m = border + (0 if circular else max(abs(dy), abs(dx)) // stride)
    if m:
        diff = diff[..., m : diff.shape[-2] - m, m : diff.shape[-1] - m]
    error = diff.abs().max()
    return (error / y.abs().max() if relative else error).item()


def vit_token_map(model, images: torch.Tensor) -> torch.Tensor:
    """The encoder's output patch tokens of a VisionTransformer as a map (B, D, H/P, W/P) (prefix tokens dropped)."""
    z = model.forward_features(images)[:, model.num_prefix_tokens :]
    gh, gw = model.patch_embed.grid
    return z.transpose(1, 2).reshape(len(z), -1, gh, gw)
