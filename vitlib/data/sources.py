"""Data sets by name, each as train / validation / test splits with their normalisation.

Small sets (Fashion-MNIST, MNIST, CIFAR, the synthetic tasks) are held as one uint8 tensor per split (`TensorSplit`),
so a batch is an index into memory; folders of images (`imagefolder:<path>`, Imagenette) stay torchvision datasets.

    get_dataset("fashion-mnist-mini")                 # the bundled subset, offline
    get_dataset("cifar10", root="~/data", download=True)
    get_dataset("imagefolder:/data/imagenet", image_size=224)
    get_dataset("synthetic-position", seed=0)         # the label is where the mark is: needs E_pos
"""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision

from .files import (
    FASHION_MNIST_CLASSES,
    DataError,
    bundled_dir,
    data_dir,
    idx_file_ok,
    load_fashion_mnist_mini,
    read_idx_split,
)
from .splits import Dataset, TensorSplit, check_finite_images, check_labels, split_off
from .splits import subset as take_subset
from .synthetic import synthetic_position, synthetic_relation

DEBIAN_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")  # the classes of synthetic-position
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
STATS = {  # per-channel mean and std of the training images, in [0, 1]
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "mnist": ((0.1307,), (0.3081,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "synthetic-position": ((0.5,), (0.25,)),
    "synthetic-relation": ((0.15,), (0.2,)),
}


def _idx_set(cls, name: str, classes: tuple[str, ...], *more_folders: Path):
    """A loader of the IDX files of MNIST or Fashion-MNIST, checked against torchvision's md5 sums."""

    def load(root: Path, download: bool, seed: int):
        md5 = {url.rsplit("/", 1)[-1]: digest for url, digest in cls.resources}
        files = list(md5)
        folders = [root / cls.__name__ / "raw", root / name, *more_folders]
        folder = next((f for f in folders if all((f / n).exists() for n in files)), None)
        if folder is None and download:
            try:
                cls(str(root), train=True, download=True)
            except Exception as err:  # network errors come in many types
                raise DataError(
                    f"could not download {name} to {root} ({type(err).__name__}: {err}). "
                    f"Without internet use 'fashion-mnist-mini' (bundled) or copy the files there."
                ) from err
            folder = root / cls.__name__ / "raw"
        if folder is None:
            raise DataError(
                f"{name} is not on this machine: looked for {files} in {', '.join(map(str, folders))}. "
                f"Pass download=True (needs internet), point root= or $VITLIB_DATA_DIR at a copy, or use the "
                f"bundled 'fashion-mnist-mini'."
            )
        for n in files:
            if not idx_file_ok(folder / n, md5[n]):
                raise DataError(
                    f"{folder / n} fails its checksum (expected md5 {md5[n]} of the original .gz): the file "
                    f"is corrupt or incomplete; delete it and download or copy it again."
                )
        train, test = (TensorSplit(*read_idx_split(folder, split)) for split in ("train", "test"))
        return train, test, classes, {"source": str(folder)}

    return load


_fashion_mnist = _idx_set(
    torchvision.datasets.FashionMNIST, "fashion-mnist", FASHION_MNIST_CLASSES, DEBIAN_FASHION_MNIST
)
_mnist = _idx_set(torchvision.datasets.MNIST, "mnist", tuple(str(i) for i in range(10)))


def _cifar(cls, name: str):
    def load(root: Path, download: bool, seed: int):
        try:
            parts = [cls(str(root), train=t, download=download) for t in (True, False)]
        except RuntimeError as err:  # torchvision: "Dataset not found or corrupted"
            raise DataError(
                f"{name} is not in {root} or fails its checksum ({err}). Pass download=True (needs internet), "
                f"point root= or $VITLIB_DATA_DIR at a copy (the folder that holds "
                f"{cls.base_folder}), or use the bundled 'fashion-mnist-mini'."
            ) from err
        except Exception as err:
            raise DataError(
                f"could not download {name} to {root} ({type(err).__name__}: {err}); "
                f"without internet use 'fashion-mnist-mini'."
            ) from err
        splits = [
            TensorSplit(torch.from_numpy(p.data).permute(0, 3, 1, 2).contiguous(), torch.as_tensor(p.targets))
            for p in parts
        ]
        return splits[0], splits[1], tuple(parts[0].classes), {"source": str(root / cls.base_folder)}

    return load


def _mini(root: Path, download: bool, seed: int):
    train, test = (TensorSplit(*load_fashion_mnist_mini(s)) for s in ("train", "test"))
    return train, test, FASHION_MNIST_CLASSES, {"source": str(bundled_dir())}


def _procedural(make, n_train: int, classes: tuple[str, ...]):
    def load(root: Path, download: bool, seed: int):
        train, test = make(n_train, seed=seed), make(n_train // 5, seed=seed + 1_000_003)
        return train, test, classes, {"generator": make.__name__}

    return load


def _imagenette(root: Path, download: bool, seed: int):
    try:
        parts = [
            torchvision.datasets.Imagenette(str(root), split=s, size="160px", download=download)
            for s in ("train", "val")
        ]
    except RuntimeError as err:
        raise DataError(
            f"Imagenette is not in {root} ({err}). Pass download=True (needs internet) or point root= at "
            f"the folder holding imagenette2-160, or use the bundled 'fashion-mnist-mini'."
        ) from err
    names = tuple(c[0] for c in parts[0].classes)
    return parts[0], parts[1], names, {"source": str(root / "imagenette2-160")}


def _imagefolder(path: Path):
    def load(root: Path, download: bool, seed: int):
        if not path.is_dir():
            raise DataError(
                f"imagefolder: {path} is not a folder. Give a folder with train/ and val/ (or test/) "
                f"subfolders, each holding one subfolder of images per class."
            )
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
    "synthetic-position": (_procedural(synthetic_position, 10_000, QUADRANTS), 1, 32, "synthetic-position"),
    "synthetic-relation": (_procedural(synthetic_relation, 20_000, ("different", "same")), 1, 32, "synthetic-relation"),
    "imagenette": (_imagenette, 3, 160, None),
}


def dataset_names() -> list[str]:
    return [*SOURCES, "imagefolder:<path>"]


def get_dataset(
    name: str = "fashion-mnist-mini",
    root: str | Path | None = None,
    download: bool = False,
    val_fraction: float = 0.1,
    subset: float | int | None = None,
    image_size: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Load a data set by name (see `dataset_names()`), split a stratified validation set off the training set,
    optionally keep a stratified `subset` of the rest (fraction <= 1 or count), and resize in-memory sets. `root`:
    where to look and download (default `data_dir()`); `seed` picks the splits (and draws the synthetic sets)."""
    root = Path(root).expanduser() if root is not None else data_dir()
    if name.startswith("imagefolder:"):
        loader, channels, native, stats = _imagefolder(Path(name.split(":", 1)[1]).expanduser()), 3, 224, None
    elif name in SOURCES:
        loader, channels, native, stats = SOURCES[name]
    else:
        raise ValueError(f"unknown data set {name!r}: choose one of {', '.join(dataset_names())}.")
    train, test, classes, info = loader(root, download, seed)
    train, val = split_off(train, val_fraction, seed) if val_fraction else (train, None)
    if subset is not None:
        train = take_subset(train, subset, seed)
    size = image_size or native
    if isinstance(train, TensorSplit):
        train, val, test = (None if split is None else split.resized(size) for split in (train, val, test))
    mean, std = STATS[stats] if stats else (IMAGENET_MEAN, IMAGENET_STD)
    data = Dataset(name, train, val, test, classes, channels, size, mean, std, info)
    check_finite_images(data)  # uint8 images cannot be NaN: a no-op but for floating-point splits
    check_labels(data)
    return data
