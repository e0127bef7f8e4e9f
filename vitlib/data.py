"""The bundled data: a stratified subset of Fashion-MNIST (MIT licence) in data/fashion-mnist-mini, checked on load."""
from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import torch

FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                         "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")
FILES = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
         "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}


class DataError(RuntimeError):
    """A data set that is missing, incomplete or corrupt; the message says where it was looked for and what to do."""


def data_root() -> Path:
    """The repository's data/ folder (or $VITLIB_DATA)."""
    return Path(os.environ.get("VITLIB_DATA", Path(__file__).resolve().parent.parent / "data"))


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (gzip or not), the format of MNIST and Fashion-MNIST."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path} is not an unsigned-byte IDX file: replace it with a fresh copy.")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise DataError(f"{path} is truncated: its header says {shape} but it holds {data.size} values.")
    return data.reshape(shape)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify_checksums(folder: Path) -> None:
    """Compare every file listed in folder/SHA256SUMS with its checksum; raise DataError naming the bad file."""
    sums = folder / "SHA256SUMS"
    if not sums.exists():
        raise DataError(f"{sums} is missing: restore data/ from the repository (git checkout -- data).")
    for line in sums.read_text().splitlines():
        digest, name = line.split()
        path = folder / name
        if not path.exists():
            raise DataError(f"{path} is missing: restore it with `git checkout -- {path}` "
                            f"or rebuild it with `python scripts/make_fashion_mnist_mini.py`.")
        if sha256(path) != digest:
            raise DataError(f"{path} fails its checksum (expected sha256 {digest[:12]}..., got {sha256(path)[:12]}...): "
                            f"the file is corrupt or was changed; restore it with `git checkout -- {path}`.")


def load_fashion_mnist_mini(split: str = "train", root: str | Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The bundled subset as (images uint8 (N, 1, 28, 28), labels int64 (N,)); split is 'train' or 'test'."""
    if split not in FILES:
        raise ValueError(f"unknown split {split!r}: use 'train' or 'test'.")
    folder = Path(root) if root is not None else data_root() / "fashion-mnist-mini"
    verify_checksums(folder)
    images, labels = (read_idx(folder / name) for name in FILES[split])
    return torch.from_numpy(images.copy()).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))
