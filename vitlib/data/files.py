"""Data on disk: where data sets are, the IDX format of (Fashion-)MNIST, checksums, and the bundled subset of
Fashion-MNIST (MIT licence) in data/fashion-mnist-mini, checked on load."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import torch

FASHION_MNIST_CLASSES = tuple("T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot".split(","))
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
REPO_DATA = Path(__file__).resolve().parents[2] / "data"  # the repository's data/ folder
ENV = "VITLIB_DATA_DIR"

# sha256 of the decompressed IDX files (the same bytes whether gzip'd by the authors or re-packed by Debian),
# read off Debian's dataset-fashion-mnist 0.0~git20200523; torchvision's md5 sums cover the original .gz files.
CONTENT_SHA256 = {
    "train-images-idx3-ubyte.gz": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte.gz": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte.gz": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte.gz": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}


class DataError(RuntimeError):
    """A data set that is missing, incomplete or corrupt; the message says where it was looked for and what to do."""


def data_dir() -> Path:
    """Where data sets are looked for and downloaded: $VITLIB_DATA_DIR, else data/cache in the repository."""
    return Path(os.environ[ENV]).expanduser() if ENV in os.environ else REPO_DATA / "cache"


def bundled_dir() -> Path:
    """The bundled subset: a copy in $VITLIB_DATA_DIR/fashion-mnist-mini when there is one, else the repository's."""
    copy = data_dir() / "fashion-mnist-mini"
    return copy if (copy / "SHA256SUMS").exists() else REPO_DATA / "fashion-mnist-mini"


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (gzip or not), the format of MNIST and Fashion-MNIST."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path} is not an unsigned-byte IDX file: replace it with a fresh copy.")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataError(f"{path} is truncated: its header says {shape} but it holds {data.size} values.")
    return data.reshape(shape)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def idx_file_ok(path: Path, md5: str) -> bool:
    """The .gz matches torchvision's md5, or its decompressed content matches CONTENT_SHA256 (Fashion-MNIST)."""
    raw = Path(path).read_bytes()
    if hashlib.md5(raw).hexdigest() == md5:
        return True
    if path.name not in CONTENT_SHA256 or raw[:2] != b"\x1f\x8b":
        return False
    try:
        return hashlib.sha256(gzip.decompress(raw)).hexdigest() == CONTENT_SHA256[path.name]
    except (OSError, EOFError):
        return False


def verify_checksums(folder: Path) -> None:
    """Compare every file listed in folder/SHA256SUMS with its checksum; raise DataError naming the bad file."""
    sums = Path(folder) / "SHA256SUMS"
    if not sums.exists():
        raise DataError(f"{sums} is missing: restore data/ from the repository (git checkout -- data).")
    for number, line in enumerate(sums.read_text().splitlines(), 1):
        if len(line.split()) != 2:
            raise DataError(f"{sums} line {number} is {line!r}, not '<sha256>  <file>': restore it from git.")
        digest, name = line.split()
        path = Path(folder) / name
        if not path.exists():
            raise DataError(
                f"{path} is missing: restore it with `git checkout -- {path}` "
                f"or rebuild it with `python scripts/make_fashion_mnist_mini.py`."
            )
        if (actual := sha256(path)) != digest:
            raise DataError(
                f"{path} fails its checksum (expected sha256 {digest[:12]}..., got {actual[:12]}...): the file is "
                f"corrupt or was changed; restore it with `git checkout -- {path}`."
            )


def load_fashion_mnist_mini(split: str = "train", root: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The bundled subset as (images uint8 (N, 1, 28, 28), labels int64 (N,)); split is 'train' or 'test'."""
    if split not in FILES:
        raise ValueError(f"unknown split {split!r}: use 'train' or 'test'.")
    folder = Path(root) if root is not None else bundled_dir()
    verify_checksums(folder)
    return read_idx_split(folder, split)


def read_idx_split(folder: Path, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(images uint8 (N, 1, 28, 28), labels int64 (N,)) from the IDX files of a (Fashion-)MNIST split in `folder`."""
    images, labels = (read_idx(Path(folder) / name) for name in FILES[split])
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DataError(
            f"{folder}: the {split} IDX files hold images {images.shape} and labels {labels.shape}; they must be "
            f"(N, rows, cols) and (N,) with the same N: replace them with fresh copies."
        )
    return torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))
