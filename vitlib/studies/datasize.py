"""Inductive bias and data size (section 3.1 'Inductive bias', section 4.3, Fig. 3 and Fig. 4): train a ViT and a
CNN on growing stratified fractions of one training set, with the same number of optimisation steps for every size,
and test what the paper says about the CNN's built-in translation equivariance.

    data = get_dataset("fashion-mnist-mini")
    cfg = TrainConfig(batch_size=64, lr=2e-3, device="cpu")
    sub = fraction_of(data, 0.05, seed=1)                     # 5 % of the training images, every class its share
    result = train_steps(cfg, model, sub, steps=150)          # 150 optimizer steps, however many epochs that is

A fixed step budget (not a fixed number of epochs) keeps the optimisation the same for every data set size: with a
fixed number of epochs the 1 % model would take 100 times fewer steps, and the curve would mix "less data" with
"less training". It is how the paper's Fig. 4 was made too (same schedule on every JFT subset, section 4.3).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..data import Dataset, TensorLoader, TensorSplit, fraction_of
from ..model import count_parameters
from ..train import TrainConfig, autocast_dtype, evaluate, resolve_device, train
from .stats import difference


@dataclass
class StepsResult:
    model: nn.Module
    test: dict
    train_loss: float  # mean training loss over the last epoch (the last pass over the subset)
    steps: int
    epochs: float  # passes over the (sub)set that the steps amount to
    n_train: int
    time_s: float


def train_steps(
    cfg: TrainConfig,
    model: nn.Module,
    data: Dataset,
    steps: int,
    warmup_steps: int | None = None,
    eval_split: str = "test",
) -> StepsResult:
    """Train `model` for exactly `steps` optimizer steps on data.train, then evaluate once on `eval_split`.

    `vitlib.train.train` with a step budget (`TrainConfig.steps`) and the recipe of `cfg` (AdamW without decay on
    biases / norms / E_pos / [class], linear warm-up then cosine decay, gradient clipping, label smoothing,
    augmentation); cfg.epochs and cfg.warmup_epochs are ignored: the run takes `steps` steps, warming up for
    `warmup_steps` (default 10 % of them). Epochs of the training split follow each other (a new shuffle each) until
    the steps are done; the batch is cfg.batch_size, or the whole split when it is smaller. No evaluation during
    training: a 1 % subset takes hundreds of epochs."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}.")
    if not isinstance(data.train, TensorSplit):
        raise ValueError("train_steps needs an in-memory training split (TensorSplit).")
    split = getattr(data, eval_split, None)
    if split is None:
        raise ValueError(f"the data set has no {eval_split!r} split to evaluate on.")
    batch = min(cfg.batch_size, len(data.train))
    warmup = max(1, round(0.1 * steps) if warmup_steps is None else warmup_steps)
    run_cfg = dataclasses.replace(
        cfg,
        batch_size=batch,
        steps=steps,
        warmup_epochs=warmup / (len(data.train) // batch),
        eval_every=0,
        eval_test=False,
        out=None,
        progress=False,
    )
    started = time.perf_counter()
    result = train(run_cfg, model=model, data=data)
    device = resolve_device(cfg.device)
    test = evaluate(
        result.model,
        TensorLoader(split, 512, data.mean, data.std, device=device),
        autocast_dtype(cfg.precision, device),
    )
    return StepsResult(
        result.model,
        test,
        result.history[-1]["train_loss"],
        steps,
        steps * batch / len(data.train),
        len(data.train),
        time.perf_counter() - started,
    )


def run_fractions(
    exp,
    models: dict[str, Callable[[int], nn.Module]],
    data: Dataset,
    fractions: Sequence[float],
    seeds: Iterable[int],
    cfg: TrainConfig,
    steps: int,
    warmup_steps: int | None = None,
) -> list[dict]:
    """For every model name, fraction and seed: a fresh model(seed), trained `steps` steps on fraction_of(data,
    fraction, seed); rows go to `exp` (a vitlib.experiments.Experiment) as condition '<name> <fraction:g>' with the
    fields model, fraction and n_train, and the metrics test_acc, test_loss, train_loss, epochs, params, time_s."""
    seeds = list(seeds)
    rows = []
    for name, make in models.items():
        for fraction in fractions:
            n_train = len(fraction_of(data, fraction, seeds[0]).train)

            def one(seed: int, make=make, fraction=fraction) -> dict:
                sub = fraction_of(data, fraction, seed)
                torch.manual_seed(seed)
                model = make(seed)
                r = train_steps(dataclasses.replace(cfg, seed=seed), model, sub, steps, warmup_steps)
                return {
                    "test_acc": r.test["acc"],
                    "test_loss": r.test["loss"],
                    "train_loss": r.train_loss,
                    "epochs": r.epochs,
                    "params": count_parameters(model),
                    "time_s": r.time_s,
                }

            rows += exp.run(condition_name(name, fraction), one, seeds, model=name, fraction=fraction, n_train=n_train)
    return rows


def condition_name(model: str, fraction: float) -> str:
    return f"{model} {fraction:g}"


def gaps(exp, a: str, b: str, fractions: Sequence[float], metric: str = "test_acc") -> list[dict]:
    """Per fraction: mean(a) - mean(b) of `metric` and its standard error (Welch, independent seeds)."""
    out = []
    for f in fractions:
        d, se = difference(exp.values(condition_name(a, f), metric), exp.values(condition_name(b, f), metric))
        out.append({"fraction": f, "gap": d, "se": se})
    return out


# ------------------------------------------------------------------------------------ translation equivariance
def shift(images: torch.Tensor, dy: int, dx: int) -> torch.Tensor:
    """Shift images (..., H, W) down by dy and right by dx pixels, circularly (what leaves one side comes back on the
    other), so that a shift loses no pixels and equivariance can be tested exactly."""
    return torch.roll(images, shifts=(dy, dx), dims=(-2, -1))


@torch.no_grad()
def equivariance_error(
    f: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor, dy: int, dx: int, stride: int = 1
) -> float:
    """max |f(shift(x)) - shift(f(x))| / max |f(x)|, f's output (B, C, H', W') a map with `stride` input pixels per
    cell: the output is shifted by (dy / stride, dx / stride) cells, so dy and dx must be multiples of `stride`.
    0 (up to rounding) means f is equivariant to that shift."""
    if dy % stride or dx % stride:
        raise ValueError(
            f"a map with stride {stride} can only be compared for shifts by multiples of {stride}, got "
            f"({dy}, {dx}); compare a shift of ({dy - dy % stride}, {dx - dx % stride}) or use stride 1."
        )
    y = f(images)
    return ((f(shift(images, dy, dx)) - shift(y, dy // stride, dx // stride)).abs().max() / y.abs().max()).item()


def vit_token_map(model, images: torch.Tensor) -> torch.Tensor:
    """The encoder's output patch tokens of a VisionTransformer as a map (B, D, H/P, W/P) (prefix tokens dropped)."""
    z = model.forward_features(images)[:, model.num_prefix_tokens :]
    gh, gw = model.patch_embed.grid
    return z.transpose(1, 2).reshape(len(z), -1, gh, gw)
