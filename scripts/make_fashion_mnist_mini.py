"""Build data/fashion-mnist-mini: a stratified, seeded subset of Fashion-MNIST (default 10,000 train / 2,000 test).

The source is the full set in IDX format, e.g. Debian's package `dataset-fashion-mnist`
(/usr/share/datasets/fashion-mnist) or a torchvision download (<root>/FashionMNIST/raw). Same input, same output:
the selection is a seeded permutation per class and the gzip files carry no timestamp.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vitlib.data.files import FILES, read_idx  # noqa: E402


def stratified(labels: np.ndarray, count: int, seed: int) -> np.ndarray:
    """`count` indices, count/10 per class, chosen by a seeded permutation, in class-interleaved order."""
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    per_class = count // len(classes)
    picks = [rng.permutation(np.flatnonzero(labels == c))[:per_class] for c in classes]
    return np.sort(np.concatenate(picks))


def write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0, filename="") as gz:
        gz.write(header + array.astype(np.uint8).tobytes())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--source", default="/usr/share/datasets/fashion-mnist", help="folder with the full set's IDX files"
    )
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "fashion-mnist-mini"))
    ap.add_argument("--train", type=int, default=10_000, help="training images (a multiple of 10)")
    ap.add_argument("--test", type=int, default=2_000, help="test images (a multiple of 10)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    src, out = Path(args.source), Path(args.out)
    missing = [n for pair in FILES.values() for n in pair if not (src / n).exists()]
    if missing:
        sys.exit(
            f"{src} lacks {missing}: install Debian's dataset-fashion-mnist or pass --source to a folder with them."
        )
    out.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", args.train), ("test", args.test)):
        images, labels = (read_idx(src / n) for n in FILES[split])
        idx = stratified(labels, count, args.seed)
        write_idx(out / FILES[split][0], images[idx])
        write_idx(out / FILES[split][1], labels[idx])
        print(f"{split}: {len(idx)} images, {np.bincount(labels[idx]).tolist()} per class")
    names = sorted(n for pair in FILES.values() for n in pair)
    (out / "SHA256SUMS").write_text(
        "".join(f"{hashlib.sha256((out / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
