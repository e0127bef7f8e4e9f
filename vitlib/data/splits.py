"""A data set as train / validation / test splits, and the subsets the experiments take of them: stratified
fractions, disjoint pre-training and fine-tuning sets, resized copies."""

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
        if self.images.shape[-1] == image_size and self.images.shape[-2] == image_size:
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

    def __repr__(self) -> str:
        sizes = {k: len(getattr(self, k)) for k in ("train", "val", "test") if getattr(self, k) is not None}
        return (
            f"Dataset({self.name!r}, {sizes}, {self.num_classes} classes, {self.in_channels}x{self.image_size}x"
            f"{self.image_size}, {'in memory' if self.in_memory else 'from files'})"
        )


def check_finite_images(data: Dataset, chunk: int = 4096) -> None:
    """Raise a DataError naming the split, the count and the first index when an in-memory split holds NaN or
    infinite pixel values. Integer images (uint8: every bundled and downloaded set, and folders of images) cannot,
    so only floating-point TensorSplits are scanned, `chunk` images at a time (one pass, little extra memory)."""
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        if not isinstance(split, TensorSplit) or not split.images.is_floating_point():
            continue
        bad, first = 0, None
        for start in range(0, len(split.images), chunk):
            rows = ~torch.isfinite(split.images[start : start + chunk]).flatten(1).all(1)
            count = int(rows.sum())
            if count and first is None:
                first = start + int(rows.nonzero()[0])
            bad += count
        if bad:
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


def _in_memory(data: Dataset, what: str) -> None:
    if not data.in_memory:
        raise ValueError(
            f"{what} works on in-memory data sets (TensorSplit); for folders of images pass subset= or "
            f"image_size= to vitlib.data.get_dataset instead."
        )


# ----------------------------------------------------------------------------------------------- stratified subsets
def stratified_indices(labels: torch.Tensor, amount: float | int, seed: int = 0) -> torch.Tensor:
    """Indices of a class-stratified subset: `amount` <= 1 is a fraction, > 1 a count; seeded, sorted.

    With one seed the subsets are nested (the 1 % images are among the 5 % ones, ...): each class's images are drawn
    in one seeded random order and the first k are kept."""
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
    mask = torch.ones(len(labels), dtype=torch.bool)
    mask[held] = False
    return take(split, torch.nonzero(mask).flatten()), take(split, held)


def subset(split, amount: float | int, seed: int = 0):
    """A stratified part of a split: a fraction <= 1 or a count."""
    return take(split, stratified_indices(labels_of(split), amount, seed))


# --------------------------------------------------------------------------------------------- whole data sets
def fraction_of(data: Dataset, fraction: float, seed: int = 0) -> Dataset:
    """`data` with a stratified `fraction` (0 < fraction <= 1) of its training split; val and test untouched."""
    _in_memory(data, "fraction_of")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}.")
    if fraction == 1:
        return data
    return dataclasses.replace(data, train=subset(data.train, float(fraction), seed))


def with_val(data: Dataset, n: int | None, seed: int | None = None) -> Dataset:
    """`data` watching only `n` of its validation images (None or 0: all of them), the first `n` or, with `seed`, a
    seeded random `n` in their original order: a cheaper check at each evaluation of a run; train and test untouched."""
    _in_memory(data, "with_val")
    if n is not None and n < 0:
        raise ValueError(f"n must be a positive number of validation images, or 0/None for all, got {n!r}.")
    if not n or data.val is None or n >= len(data.val):
        return data
    if seed is None:
        keep = torch.arange(n)
    else:
        keep = torch.randperm(len(data.val), generator=torch.Generator().manual_seed(seed))[:n].sort().values
    return dataclasses.replace(data, val=data.val.select(keep))


def with_train(data: Dataset, indices: torch.Tensor, val: int | None = None) -> Dataset:
    """`data` with only the training images at `indices` (and, with `val`, only the first `val` validation images:
    see `with_val`)."""
    _in_memory(data, "with_train")
    return with_val(dataclasses.replace(data, train=data.train.select(torch.as_tensor(indices))), val)


def disjoint_subsets(labels: torch.Tensor, first: int, second: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two disjoint class-stratified index sets of `first` and `second` examples (e.g. a pre-training set and a small
    labelled fine-tuning set), sorted; seeded."""
    if first < 1 or second < 1 or first + second > len(labels):
        raise ValueError(f"need 1 <= first, second and first + second <= {len(labels)}, got {first} and {second}.")
    a = stratified_indices(labels, first, seed)
    rest = torch.ones(len(labels), dtype=torch.bool)
    rest[a] = False
    rest = torch.nonzero(rest).flatten()
    b = rest[stratified_indices(labels[rest], second, seed + 1)]
    return a, b.sort().values


def resize_dataset(data: Dataset, image_size: int) -> Dataset:
    """The same in-memory data set with every split resized to image_size x image_size (antialiased), e.g. to
    pre-train at a low resolution and fine-tune at the native one."""
    _in_memory(data, "resize_dataset")
    if image_size < 1:
        raise ValueError(f"image_size must be positive, got {image_size}.")

    def resize(split):
        return None if split is None else split.resized(image_size)

    return dataclasses.replace(
        data, train=resize(data.train), val=resize(data.val), test=resize(data.test), image_size=image_size
    )


def class_subset(data: Dataset, classes) -> Dataset:
    """`data` with only the images of `classes` (in every split), relabelled 0..k-1 in the order given: a task of
    its own, e.g. to pre-train on five Fashion-MNIST classes and transfer to the other five."""
    _in_memory(data, "class_subset")
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
