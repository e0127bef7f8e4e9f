"""Data sets by name, each as train / validation / test splits with their normalisation.

Small sets (Fashion-MNIST, MNIST, CIFAR, the synthetic task) are held as one uint8 tensor per split (`TensorSplit`),
so a batch is an index into memory (on the GPU when there is one) instead of per-image PIL work. Folders of images
(`imagefolder:<path>`, Imagenette) stay torchvision datasets read by a DataLoader.

    get_dataset("fashion-mnist-mini")                 # the bundled subset, offline
    get_dataset("cifar10", root="~/data", download=True)
    get_dataset("imagefolder:/data/imagenet", image_size=224)
    get_dataset("synthetic-position", seed=0)         # the label is where the mark is: needs E_pos
"""
from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torchvision
from torchvision.transforms.v2 import functional as TF

from .data import FASHION_MNIST_CLASSES, DataError, data_root, load_fashion_mnist_mini, read_idx

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
STATS = {  # per-channel mean and std of the training images, in [0, 1]
    "fashion-mnist": ((0.2860,), (0.3530,)), "mnist": ((0.1307,), (0.3081,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "synthetic-position": ((0.5,), (0.25,)),
}


@dataclass
class TensorSplit:
    """One split in memory: images uint8 (N, C, H, W) and labels int64 (N,)."""
    images: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]

    def select(self, idx: torch.Tensor) -> "TensorSplit":
        return TensorSplit(self.images[idx], self.labels[idx])

    def to(self, device) -> "TensorSplit":
        return TensorSplit(self.images.to(device), self.labels.to(device))


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
        return (f"Dataset({self.name!r}, {sizes}, {self.num_classes} classes, {self.in_channels}x{self.image_size}x"
                f"{self.image_size}, {'in memory' if self.in_memory else 'from files'})")


# ----------------------------------------------------------------------------------------------- subsets and splits
def stratified_indices(labels: torch.Tensor, amount: float | int, seed: int = 0) -> torch.Tensor:
    """Indices of a class-stratified subset: `amount` <= 1 is a fraction, > 1 a count; seeded, sorted."""
    n = len(labels)
    count = round(amount * n) if isinstance(amount, float) and amount <= 1 else int(amount)
    if not 0 < count <= n:
        raise ValueError(f"a subset must keep between 1 and {n} examples, asked for {amount!r} ({count}).")
    g = torch.Generator().manual_seed(seed)
    classes, counts = labels.unique(return_counts=True)
    share = counts.double() * count / n                      # each class keeps its share, rounded by largest remainder
    keep = share.floor().long()
    keep[torch.argsort(share - keep, descending=True)[: count - int(keep.sum())]] += 1
    picks = [torch.nonzero(labels == c).flatten()[torch.randperm(int(k_all), generator=g)[:k]]
             for c, k, k_all in zip(classes, keep, counts)]
    return torch.cat(picks).sort().values


def split_off(split: TensorSplit | torch.utils.data.Dataset, labels: torch.Tensor, fraction: float, seed: int):
    """Split a stratified `fraction` off (the validation set); returns (rest, held_out)."""
    held = stratified_indices(labels, fraction, seed)
    mask = torch.ones(len(labels), dtype=torch.bool)
    mask[held] = False
    rest = torch.nonzero(mask).flatten()
    if isinstance(split, TensorSplit):
        return split.select(rest), split.select(held)
    return torch.utils.data.Subset(split, rest.tolist()), torch.utils.data.Subset(split, held.tolist())


def _labels_of(split) -> torch.Tensor:
    if isinstance(split, TensorSplit):
        return split.labels
    if isinstance(split, torch.utils.data.Subset):
        return _labels_of(split.dataset)[torch.as_tensor(split.indices)]
    targets = getattr(split, "targets", None)
    if targets is None and hasattr(split, "_samples"):  # Imagenette
        targets = [t for _, t in split._samples]
    if targets is None:
        raise ValueError(f"cannot read the labels of {type(split).__name__} to make a stratified subset.")
    return torch.as_tensor(targets)


def _subset(split, amount, seed):
    idx = stratified_indices(_labels_of(split), amount, seed)
    return split.select(idx) if isinstance(split, TensorSplit) else torch.utils.data.Subset(split, idx.tolist())


# ----------------------------------------------------------------------------------------------------- the sources
def default_root() -> Path:
    """Where downloaded data sets go: $VITLIB_DATA_DIR, else data/cache in the repository."""
    return Path(os.environ.get("VITLIB_DATA_DIR", data_root() / "cache")).expanduser()


# sha256 of the decompressed IDX files (the same bytes whether gzip'd by the authors or re-packed by Debian),
# read off Debian's dataset-fashion-mnist 0.0~git20200523; torchvision's md5 sums cover the original .gz files.
CONTENT_SHA256 = {
    "train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}


def _file_ok(path: Path, md5: str) -> bool:
    """The .gz matches torchvision's md5, or its decompressed content matches CONTENT_SHA256 (Fashion-MNIST)."""
    raw = path.read_bytes()
    if hashlib.md5(raw).hexdigest() == md5:
        return True
    if path.name in CONTENT_SHA256 and raw[:2] == b"\x1f\x8b":
        try:
            return hashlib.sha256(gzip.decompress(raw)).hexdigest() == CONTENT_SHA256[path.name]
        except (OSError, EOFError):
            return False
    return False


def _idx_set(cls, folders: list[Path], name: str, download: bool, root: Path):
    """(train, test) from the IDX files of MNIST or Fashion-MNIST, checked against torchvision's md5 sums."""
    files = [url.rsplit("/", 1)[-1] for url, _ in cls.resources]
    md5 = {url.rsplit("/", 1)[-1]: digest for url, digest in cls.resources}
    folder = next((f for f in folders if all((f / n).exists() for n in files)), None)
    if folder is None and download:
        try:
            cls(str(root), train=True, download=True)
        except Exception as err:  # network errors come in many types
            raise DataError(f"could not download {name} to {root} ({type(err).__name__}: {err}). "
                            f"Without internet use 'fashion-mnist-mini' (bundled) or copy the files there.") from err
        folder = root / cls.__name__ / "raw"
    if folder is None:
        raise DataError(f"{name} is not on this machine: looked for {files} in {', '.join(map(str, folders))}. "
                        f"Pass download=True (needs internet), point root= or $VITLIB_DATA_DIR at a copy, or use the "
                        f"bundled 'fashion-mnist-mini'.")
    for n in files:
        if not _file_ok(folder / n, md5[n]):
            raise DataError(f"{folder / n} fails its checksum (expected md5 {md5[n]} of the original .gz): the file "
                            f"is corrupt or incomplete; delete it and download or copy it again.")
    read = {n.split("-")[0] + n.split("-")[1][:1]: read_idx(folder / n) for n in files}  # train-images -> 'traini'
    to_split = lambda i, l: TensorSplit(torch.from_numpy(read[i].copy()).unsqueeze(1), torch.from_numpy(read[l].astype(np.int64)))
    return to_split("traini", "trainl"), to_split("t10ki", "t10kl"), folder


def _fashion_mnist(root: Path, download: bool):
    folders = [root / "FashionMNIST" / "raw", root / "fashion-mnist", DEBIAN_FASHION_MNIST]
    train, test, folder = _idx_set(torchvision.datasets.FashionMNIST, folders, "fashion-mnist", download, root)
    return train, test, FASHION_MNIST_CLASSES, {"source": str(folder)}


def _mnist(root: Path, download: bool):
    train, test, folder = _idx_set(torchvision.datasets.MNIST, [root / "MNIST" / "raw", root / "mnist"], "mnist", download, root)
    return train, test, tuple(str(i) for i in range(10)), {"source": str(folder)}


def _cifar(cls, name: str):
    def load(root: Path, download: bool):
        try:
            parts = [cls(str(root), train=t, download=download) for t in (True, False)]
        except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
            raise DataError(f"{name} is not in {root} or fails its checksum ({err}). Pass download=True (needs internet), "
                            f"point root= or $VITLIB_DATA_DIR at a copy (the folder that holds "
                            f"{cls.base_folder}), or use the bundled 'fashion-mnist-mini'.") from err
        except Exception as err:
            raise DataError(f"could not download {name} to {root} ({type(err).__name__}: {err}); "
                            f"without internet use 'fashion-mnist-mini'.") from err
        splits = [TensorSplit(torch.from_numpy(p.data).permute(0, 3, 1, 2).contiguous(), torch.as_tensor(p.targets))
                  for p in parts]
        return splits[0], splits[1], tuple(parts[0].classes), {"source": str(root / cls.base_folder)}
    return load


def _mini(root: Path, download: bool):
    train, test = (TensorSplit(*load_fashion_mnist_mini(s)) for s in ("train", "test"))
    return train, test, FASHION_MNIST_CLASSES, {"source": str(data_root() / "fashion-mnist-mini")}


def synthetic_position(n: int, size: int = 32, mark: int = 4, seed: int = 0) -> TensorSplit:
    """The label (0-3) is the quadrant that holds a bright `mark` x `mark` square; the background is uniform noise.

    Every quadrant sees the same distribution of patch contents, so a ViT without position embeddings (permutation
    invariant over patches) cannot beat chance (25%); with E_pos it can. Marks are placed on a grid of `mark` pixels.
    """
    g = torch.Generator().manual_seed(seed)
    images = (torch.rand(n, 1, size, size, generator=g) * 0.6 * 255).to(torch.uint8)
    labels = torch.randint(0, 4, (n,), generator=g)
    cells = size // 2 // mark                           # mark positions per quadrant side
    for i in range(n):
        qy, qx = divmod(int(labels[i]), 2)
        y = qy * size // 2 + int(torch.randint(0, cells, (1,), generator=g)) * mark
        x = qx * size // 2 + int(torch.randint(0, cells, (1,), generator=g)) * mark
        images[i, :, y:y + mark, x:x + mark] = 255
    return TensorSplit(images, labels)


def _synthetic(root: Path, download: bool, seed: int = 0):
    train, test = synthetic_position(10_000, seed=seed), synthetic_position(2_000, seed=seed + 1_000_003)
    return train, test, ("top-left", "top-right", "bottom-left", "bottom-right"), {"generator": "synthetic_position"}


def _imagenette(root: Path, download: bool):
    try:
        parts = [torchvision.datasets.Imagenette(str(root), split=s, size="160px", download=download) for s in ("train", "val")]
    except RuntimeError as err:
        raise DataError(f"Imagenette is not in {root} ({err}). Pass download=True (needs internet) or point root= at "
                        f"the folder holding imagenette2-160, or use the bundled 'fashion-mnist-mini'.") from err
    names = tuple(c[0] for c in parts[0].classes)
    return parts[0], parts[1], names, {"source": str(root / "imagenette2-160")}


def _imagefolder(path: Path):
    def load(root: Path, download: bool):
        if not path.is_dir():
            raise DataError(f"imagefolder: {path} is not a folder. Give a folder with train/ and val/ (or test/) "
                            f"subfolders, each holding one subfolder of images per class.")
        subs = {p.name for p in path.iterdir() if p.is_dir()}
        test_name = "val" if "val" in subs else "test" if "test" in subs else None
        if "train" not in subs or test_name is None:
            raise DataError(f"imagefolder: {path} needs train/ and val/ (or test/) subfolders; it has {sorted(subs)}.")
        parts = [torchvision.datasets.ImageFolder(str(path / s)) for s in ("train", test_name)]
        if parts[0].classes != parts[1].classes:
            raise DataError(f"imagefolder: the classes of {path / 'train'} and {path / test_name} differ.")
        return parts[0], parts[1], tuple(parts[0].classes), {"source": str(path)}
    return load


SOURCES = {  # name -> (loader, channels, native image size, mean/std key)
    "fashion-mnist-mini": (_mini, 1, 28, "fashion-mnist"),
    "fashion-mnist": (_fashion_mnist, 1, 28, "fashion-mnist"),
    "mnist": (_mnist, 1, 28, "mnist"),
    "cifar10": (_cifar(torchvision.datasets.CIFAR10, "cifar10"), 3, 32, "cifar10"),
    "cifar100": (_cifar(torchvision.datasets.CIFAR100, "cifar100"), 3, 32, "cifar100"),
    "synthetic-position": (_synthetic, 1, 32, "synthetic-position"),
    "imagenette": (_imagenette, 3, 160, None),
}


def dataset_names() -> list[str]:
    return [*SOURCES, "imagefolder:<path>"]


def get_dataset(name: str = "fashion-mnist-mini", root: str | Path | None = None, download: bool = False,
                val_fraction: float = 0.1, subset: float | int | None = None, image_size: int | None = None,
                seed: int = 0) -> Dataset:
    """Load a data set by name (see `dataset_names()`), split a stratified validation set off the training set,
    optionally keep a stratified `subset` of the rest (fraction <= 1 or count), and resize in-memory sets."""
    root = Path(root).expanduser() if root is not None else default_root()
    if name.startswith("imagefolder:"):
        loader, channels, native, stats = _imagefolder(Path(name.split(":", 1)[1]).expanduser()), 3, 224, None
    elif name in SOURCES:
        loader, channels, native, stats = SOURCES[name]
    else:
        raise ValueError(f"unknown data set {name!r}: choose one of {', '.join(dataset_names())}.")
    train, test, classes, info = loader(root, download) if name != "synthetic-position" else _synthetic(root, download, seed)
    val = None
    if val_fraction:
        train, val = split_off(train, _labels_of(train), val_fraction, seed)
    if subset is not None:
        train = _subset(train, subset, seed)
    size = image_size or native
    if isinstance(train, TensorSplit) and size != train.images.shape[-1]:
        resize = lambda s: None if s is None else TensorSplit(TF.resize(s.images, [size, size], antialias=True), s.labels)
        train, val, test = resize(train), resize(val), resize(test)
    mean, std = STATS[stats] if stats else (IMAGENET_MEAN, IMAGENET_STD)
    return Dataset(name, train, val, test, classes, channels, size, mean, std, info)
