"""A data set as train / validation / test splits, and the subsets the experiments take of them: stratified
fractions and counts, resized copies."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch
from torchvision.transforms.v2 import functional as TF

from .files import DataError


@dataclass
class TensorSplit:
    """One split in memory: images uint8 (N, C, H, W) and labels int64 (N,)."""

    images: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self):
        if len(self.images) != len(self.labels):
            raise DataError(f"{len(self.images)} images but {len(self.labels)} labels: give one label per image.")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]

    def select(self, idx: torch.Tensor) -> TensorSplit:
        return TensorSplit(self.images[idx], self.labels[idx])

    def to(self, device) -> TensorSplit:
        return TensorSplit(self.images.to(device), self.labels.to(device))

    def resized(self, image_size: int) -> TensorSplit:
        """The same images resized to image_size x image_size (antialiased)."""
        if tuple(self.images.shape[-2:]) == (image_size, image_size):
            return self
        return TensorSplit(TF.resize(self.images, [image_size, image_size], antialias=True), self.labels)


@dataclass
class Dataset:
    """What a training run needs to know about a data set."""

    name: str
    train: TensorSplit | torch.utils.data.Dataset
    val: TensorSplit | torch.utils.data.Dataset | None
    test: TensorSplit | torch.utils.data.Dataset
    classes: tuple[str, ...]
    in_channels: int
    image_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    info: dict = field(default_factory=dict)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def in_memory(self) -> bool:
        return isinstance(self.train, TensorSplit)

    @property
    def splits(self) -> dict:
        """{'train': ..., 'val': ..., 'test': ...}, without a missing validation split."""
        return {k: getattr(self, k) for k in ("train", "val", "test") if getattr(self, k) is not None}

    def __repr__(self) -> str:
        sizes = {k: len(split) for k, split in self.splits.items()}
        return (
            f"Dataset({self.name!r}, {sizes}, {self.num_classes} classes, {self.in_channels}x{self.image_size}x"
            f"{self.image_size}, {'in memory' if self.in_memory else 'from files'})"
        )


def check_finite_images(data: Dataset, chunk: int = 4096) -> None:
    """Raise a DataError when a floating-point in-memory split holds NaN or infinite pixels (uint8 images cannot),
    or the normalisation mean/std is not finite (std not positive). Scans `chunk` images at a time."""
    for name, split in data.splits.items():
        if not isinstance(split, TensorSplit) or not split.images.is_floating_point():
            continue
        rows = torch.cat([~torch.isfinite(images).flatten(1).all(1) for images in split.images.split(chunk)])
        if rows.any():
            bad, first = int(rows.sum()), int(rows.nonzero()[0])
            what = "split" if name != "val" else "split (held out of the training images)"
            raise DataError(
                f"the {name} {what} of {data.name!r} has {bad} image{'s' * (bad != 1)} of {len(split)} with NaN/inf "
                f"values (first at index {first}): clean the data or drop those images before training, e.g. "
                f"keep = torch.isfinite(images).flatten(1).all(1); images, labels = images[keep], labels[keep]."
            )
    for what, values in (("mean", data.mean), ("std", data.std)):
        t = torch.as_tensor(values, dtype=torch.float64)
        if not torch.isfinite(t).all() or (what == "std" and (t <= 0).any()):
            raise DataError(
                f"the normalisation {what} of {data.name!r} is {tuple(values)}: it must be finite"
                f"{' and positive' if what == 'std' else ''}."
            )


def check_labels(data: Dataset) -> None:
    """Raise a DataError when an in-memory split has a label outside 0..K-1 or a data set fewer than two classes."""
    if data.num_classes < 2:
        raise DataError(f"{data.name!r} has {data.num_classes} class: a classifier needs at least two.")
    for name, split in data.splits.items():
        if not isinstance(split, TensorSplit) or not len(split):
            continue
        low, high = int(split.labels.min()), int(split.labels.max())
        if not 0 <= low <= high < data.num_classes:
            raise DataError(
                f"the {name} split of {data.name!r} has labels {low}..{high}, but the data set has "
                f"{data.num_classes} classes: labels must be 0..{data.num_classes - 1}."
            )


def check_in_memory(data: Dataset, what: str) -> None:
    """Raise when `what` is asked of a data set read from files."""
    if not data.in_memory:
        raise ValueError(
            f"{what} works on in-memory data sets (TensorSplit); for folders of images pass subset= or "
            f"image_size= to vitlib.data.get_dataset instead."
        )


# ----------------------------------------------------------------------------------------------- stratified subsets
def stratified_indices(labels: torch.Tensor, amount: float | int, seed: int = 0) -> torch.Tensor:
    """Indices of a class-stratified subset: `amount` <= 1 is a fraction, > 1 a count; seeded, sorted. With one seed
    the subsets are nested (the 1 % images are among the 5 % ones): each class drawn in one order, the first k kept."""
    n = len(labels)
    count = round(amount * n) if isinstance(amount, float) and amount <= 1 else int(amount)
    if not 0 < count <= n:
        raise ValueError(f"a subset must keep between 1 and {n} examples, asked for {amount!r} ({count}).")
    g = torch.Generator().manual_seed(seed)
    classes, counts = labels.unique(return_counts=True)
    share = counts.double() * count / n  # each class keeps its share, rounded by largest remainder
    keep = share.floor().long()
    keep[torch.argsort(share - keep, descending=True)[: count - int(keep.sum())]] += 1
    picks = [
        torch.nonzero(labels == c).flatten()[torch.randperm(int(k_all), generator=g)[:k]]
        for c, k, k_all in zip(classes, keep, counts)
    ]
    return torch.cat(picks).sort().values


def labels_of(split) -> torch.Tensor:
    """The labels of a TensorSplit, a Subset of one, or a torchvision data set."""
    if isinstance(split, TensorSplit):
        return split.labels
    if isinstance(split, torch.utils.data.Subset):
        return labels_of(split.dataset)[torch.as_tensor(split.indices)]
    targets = getattr(split, "targets", None)
    if targets is None and hasattr(split, "_samples"):  # Imagenette
        targets = [t for _, t in split._samples]
    if targets is None:
        raise ValueError(f"cannot read the labels of {type(split).__name__} to make a stratified subset.")
    return torch.as_tensor(targets)


def take(split, idx: torch.Tensor):
    """The examples `idx` of a split (a TensorSplit, or a Subset of another data set)."""
    return split.select(idx) if isinstance(split, TensorSplit) else torch.utils.data.Subset(split, idx.tolist())


def split_off(split, fraction: float, seed: int):
    """Split a stratified `fraction` off (the validation set); returns (rest, held_out)."""
    labels = labels_of(split)
    held = stratified_indices(labels, fraction, seed)
    rest = torch.nonzero(~torch.isin(torch.arange(len(labels)), held)).flatten()
    return take(split, rest), take(split, held)


def subset(split, amount: float | int, seed: int = 0):
    """A stratified part of a split: a fraction <= 1 or a count."""
    return take(split, stratified_indices(labels_of(split), amount, seed))


# --------------------------------------------------------------------------------------------- whole data sets
def with_val(data: Dataset, n: int | None, seed: int | None = None) -> Dataset:
    """`data` with only `n` of its validation images (None or 0: all), the first `n` or, with `seed`, a seeded random
    `n` in their original order: a cheaper check at each evaluation; train and test untouched."""
    check_in_memory(data, "with_val")
    if n is not None and n < 0:
        raise ValueError(f"n must be a positive number of validation images, or 0/None for all, got {n!r}.")
    if not n or data.val is None or n >= len(data.val):
        return data
    g = None if seed is None else torch.Generator().manual_seed(seed)
    keep = torch.arange(n) if g is None else torch.randperm(len(data.val), generator=g)[:n].sort().values
    return dataclasses.replace(data, val=data.val.select(keep))


def with_train(data: Dataset, indices: torch.Tensor, val: int | None = None) -> Dataset:
    """`data` with only the training images at `indices` (and `with_val(data, val)`)."""
    check_in_memory(data, "with_train")
    return with_val(dataclasses.replace(data, train=data.train.select(torch.as_tensor(indices))), val)


def resize_dataset(data: Dataset, image_size: int) -> Dataset:
    """Every split resized to image_size x image_size (antialiased), e.g. to pre-train at a low resolution."""
    check_in_memory(data, "resize_dataset")
    if image_size < 1:
        raise ValueError(f"image_size must be positive, got {image_size}.")
    resized = {name: split.resized(image_size) for name, split in data.splits.items()}
    return dataclasses.replace(data, **resized, image_size=image_size)
