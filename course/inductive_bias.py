"""Inductive biases of the four layer types (§3.1: "much less image-specific inductive bias than CNNs"): fixed
shuffles of the patches or the pixels, the small models the experiment trains on them (an MLP on pixels, a GRU over
image rows, a CNN, a ViT), the checks that show each bias by hand (receptive fields, translation, permutations
absorbed into weights or into E_pos), and the figure of the experiment."""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from vitlib.data import Dataset, TensorSplit
from vitlib.model import create_cnn, create_model, patchify, unpatchify

from .datasize import equivariance_error
from .runs import train_run
from .stats import mean_std, t_interval

INPUTS = ("original", "patches", "pixels")  # the three inputs of the experiment
MODELS = ("MLP", "CNN", "RNN", "ViT")


# ------------------------------------------------------------------------------------------------ the shuffles
def fixed_permutation(n: int, seed: int) -> torch.Tensor:
    """A random permutation of range(n), the same for every call with the same seed."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    """The permutation that undoes `perm`: x[perm][inverse] == x."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(len(perm))
    return inv


def permutation_matrix(perm: torch.Tensor) -> torch.Tensor:
    """The matrix Q with (Q @ x) == x[perm] for a vector x: row j is one-hot at perm[j]."""
    return torch.eye(len(perm))[perm]


def shuffle_patches(images: torch.Tensor, perm: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) with its P x P patches moved: patch j of the result is patch perm[j] of the input, each patch's
    content intact."""
    grid = (images.shape[-2] // patch_size, images.shape[-1] // patch_size)
    if len(perm) != grid[0] * grid[1]:
        raise ValueError(
            f"a permutation of {len(perm)} patches for a {grid[0]}x{grid[1]} grid of {patch_size}-px ones."
        )
    return unpatchify(patchify(images, patch_size)[:, perm], patch_size, grid, images.shape[1])


def shuffle_pixels(images: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) with its pixel positions permuted (all channels of a pixel move together): pixel j of the
    result, in row-major order, is pixel perm[j] of the input."""
    b, c, h, w = images.shape
    if len(perm) != h * w:
        raise ValueError(f"a permutation of {len(perm)} pixels for {h}x{w} images.")
    return images.reshape(b, c, h * w)[:, :, perm].reshape(b, c, h, w)


def shuffle(images: torch.Tensor, kind: str, patch_size: int, seed: int) -> torch.Tensor:
    """The experiment's inputs: 'original', 'patches' (a fixed shuffle of the patches) or 'pixels' (of the pixels);
    the permutation depends on the seed only, so every image (train, validation, test) gets the same one."""
    h, w = images.shape[-2:]
    if kind == "original":
        return images
    if kind == "patches":
        return shuffle_patches(images, fixed_permutation((h // patch_size) * (w // patch_size), seed), patch_size)
    if kind == "pixels":
        return shuffle_pixels(images, fixed_permutation(h * w, seed))
    raise ValueError(f"unknown input {kind!r}: choose one of {', '.join(INPUTS)}.")


def shuffled_dataset(data: Dataset, kind: str, patch_size: int, seed: int) -> Dataset:
    """`data` with every split shuffled by the same fixed permutation (`shuffle`)."""
    if not data.in_memory:
        raise ValueError("shuffled_dataset needs an in-memory data set (TensorSplit).")

    def one(split):
        return None if split is None else TensorSplit(shuffle(split.images, kind, patch_size, seed), split.labels)

    return dataclasses.replace(data, train=one(data.train), val=one(data.val), test=one(data.test))


# -------------------------------------------------------------------------------------------------- the models
class PixelMLP(nn.Module):
    """A fully connected network on the flattened pixels: every input is connected to every hidden unit."""

    def __init__(self, in_features: int, hidden: int, num_classes: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class RowGRU(nn.Module):
    """A recurrent network that reads an image row by row, top to bottom (one row of W*C values per time step), with
    the same GRU cell at every step; its last hidden state goes to a linear classifier."""

    def __init__(self, row_features: int, hidden: int, num_classes: int):
        super().__init__()
        self.gru = nn.GRU(row_features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def rows(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> the sequence (B, H, W*C) of rows."""
        return x.permute(0, 2, 3, 1).flatten(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(self.rows(x))
        return self.head(h[-1])


def gru_by_hand(gru: nn.GRU, seq: torch.Tensor) -> torch.Tensor:
    """The outputs of a one-layer batch-first GRU computed step by step with ONE GRUCell holding its weights: the
    same weights at every time step (weight sharing over time)."""
    cell = nn.GRUCell(gru.input_size, gru.hidden_size)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).copy_(getattr(gru, f"{name}_l0"))
    h, outs = seq.new_zeros(seq.shape[0], gru.hidden_size), []
    for t in range(seq.shape[1]):
        h = cell(seq[:, t], h)
        outs.append(h)
    return torch.stack(outs, dim=1)


def build_model(kind: str, data: Dataset, sizes: dict) -> nn.Module:
    """One of MODELS sized for `data`: sizes['mlp_hidden'], ['rnn_hidden'], ['cnn'] (a small-ResNet name) and
    ['vit'] (create_model options, with 'name' and 'patch_size')."""
    c, s, k = data.in_channels, data.image_size, data.num_classes
    if kind == "MLP":
        return PixelMLP(c * s * s, sizes["mlp_hidden"], k)
    if kind == "RNN":
        return RowGRU(c * s, sizes["rnn_hidden"], k)
    if kind == "CNN":
        return create_cnn(sizes["cnn"], k, c)
    if kind == "ViT":
        opts = dict(sizes["vit"])
        return create_model(opts.pop("name"), num_classes=k, image_size=s, in_channels=c, **opts)
    raise ValueError(f"unknown model {kind!r}: choose one of {', '.join(MODELS)}.")


# ------------------------------------------------------------------------------------ the biases, checked by hand
def influence(fn, x: torch.Tensor, select) -> torch.Tensor:
    """|d <r, select(fn(x))> / d x| summed over the channels, (H, W) for one image x (1, C, H, W), with r a fixed
    random direction (a plain sum would vanish after a LayerNorm): which input pixels can change the output picked
    by `select` (its receptive field where the map is non-zero)."""
    x = x.detach().clone().requires_grad_(True)
    out = select(fn(x))
    r = torch.randn(out.shape, generator=torch.Generator().manual_seed(0)).to(out)
    (grad,) = torch.autograd.grad(out, x, grad_outputs=r)
    return grad[0].abs().sum(0)


def translation_error(fn, x: torch.Tensor, dy: int, dx: int, border: int) -> float:
    """max |fn(shift(x)) - shift(fn(x))| away from the borders (`border` pixels of the output left out), for a map
    fn of images to same-size feature maps and a shift by (dy, dx) pixels (zeros shifted in): the absolute
    `course.datasize.equivariance_error` of a non-circular shift."""
    return equivariance_error(fn, x, dy, dx, circular=False, border=border, relative=False)


def absorb_pixel_permutation(linear: nn.Linear, perm: torch.Tensor) -> nn.Linear:
    """A copy of a Linear layer on flattened pixels whose input columns are permuted so that it computes, on
    permuted inputs x[perm], what `linear` computes on x: W' = W[:, perm]."""
    out = copy.deepcopy(linear)
    with torch.no_grad():
        out.weight.copy_(linear.weight[:, perm])
    return out


def absorb_patch_permutation(vit: nn.Module, perm: torch.Tensor) -> nn.Module:
    """A copy of a ViT with learned 1D E_pos whose patch rows are permuted (E'_pos[j] = E_pos[perm[j]], the [class]
    row kept), so that on images with their patches shuffled by `perm` it computes exactly what `vit` computes on the
    original images."""
    if vit.config.pos_embed != "learned":
        raise ValueError(f"absorbing a patch shuffle needs learned 1D E_pos, this ViT has {vit.config.pos_embed!r}.")
    out, prefix = copy.deepcopy(vit), vit.num_prefix_tokens
    with torch.no_grad():
        out.pos_embed[:, prefix:] = vit.pos_embed[:, prefix + perm]
    return out


# ------------------------------------------------------------------------------------------- the experiment's numbers
def condition(model: str, inputs: str) -> str:
    """The experiment's name of a condition, e.g. 'CNN · patches'."""
    return f"{model} · {inputs}"


def trainer(cfg, data: Dataset, model: str, inputs: str, patch_size: int, sizes: dict):
    """fn(seed) -> metrics of one run for `Experiment.run` (and `sweep.choose_rates`): a fresh `model`
    (`build_model`) trained with `cfg` (`runs.train_run`) on `data` shuffled as `inputs` with the permutations
    of seed 1000 + seed."""
    return train_run(
        cfg,
        data=lambda seed: shuffled_dataset(data, inputs, patch_size, seed=1000 + seed),
        model=lambda seed: build_model(model, data, sizes),
    )


def drop(exp, model: str, inputs: str, metric: str = "test_acc") -> dict:
    """The accuracy a shuffle costs a model: mean(original) - mean(shuffled) over the seeds, with its standard error,
    degrees of freedom and 95% interval (`stats.t_interval`, Welch: the arms are trained apart)."""
    return t_interval(exp.values(condition(model, "original"), metric), exp.values(condition(model, inputs), metric))


def plot_accuracy_bars(ax, exp, models=MODELS, inputs=INPUTS, metric: str = "test_acc", chance: float | None = None):
    """Grouped bars: one group per model, one bar per input, mean ± std over the seeds, every seed as a dot."""
    width = 0.8 / len(inputs)
    for j, kind in enumerate(inputs):
        stats = [mean_std(exp.values(condition(m, kind), metric)) for m in models]
        xs = [i + (j - (len(inputs) - 1) / 2) * width for i in range(len(models))]
        ax.bar(xs, [m for m, _ in stats], width, yerr=[s for _, s in stats], capsize=3, label=kind, alpha=0.8)
        for x, m in zip(xs, models):
            vals = exp.values(condition(m, kind), metric)
            ax.plot([x] * len(vals), vals, "k.", ms=3)
    if chance is not None:
        ax.axhline(chance, color="gray", ls=":", lw=1, label="chance")
    ax.set_xticks(range(len(models)), models)
    ax.set(xlabel="model type", ylabel="test accuracy (mean ± std over seeds)", ylim=(0, 1))
    ax.legend(title="input", fontsize=8)
    return ax
