"""The bundled Fashion-MNIST subset: shapes, balance, checksums on load, and the script that rebuilds it."""

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vitlib import data
from vitlib.data.files import FILES, DataError, load_fashion_mnist_mini, read_idx

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "data" / "fashion-mnist-mini"
FULL_SET = Path("/usr/share/datasets/fashion-mnist")
ALL_FILES = [name for pair in FILES.values() for name in pair]


@pytest.fixture
def copy(tmp_path) -> Path:
    """A private copy of the bundled folder, free to damage."""
    return Path(shutil.copytree(BUNDLED, tmp_path / "fashion-mnist-mini"))


@pytest.mark.parametrize("split, count", [("train", 10_000), ("test", 2_000)])
def test_shapes_types_and_balance(split, count):
    images, labels = load_fashion_mnist_mini(split)
    assert images.shape == (count, 1, 28, 28) and images.dtype == torch.uint8
    assert labels.shape == (count,) and labels.dtype == torch.int64
    assert torch.equal(torch.bincount(labels), torch.full((10,), count // 10))
    assert images.float().mean() > 10  # real pictures, not zeros
    assert len(data.FASHION_MNIST_CLASSES) == 10


def test_root_argument_and_environment_variable(copy, monkeypatch):
    images, labels = load_fashion_mnist_mini("test")
    copied_images, copied_labels = load_fashion_mnist_mini("test", root=copy)
    assert torch.equal(copied_images, images) and torch.equal(copied_labels, labels)
    monkeypatch.setenv("VITLIB_DATA_DIR", str(copy.parent))  # the copy is now where vitlib looks by default
    assert data.data_dir() == copy.parent and data.bundled_dir() == copy
    (copy / FILES["test"][1]).unlink()
    with pytest.raises(DataError, match=re.escape(str(copy / FILES["test"][1]))):
        load_fashion_mnist_mini("test")


def test_only_vitlib_data_dir_is_read(monkeypatch, tmp_path):
    monkeypatch.delenv("VITLIB_DATA_DIR", raising=False)
    monkeypatch.setenv("VITLIB_DATA", str(tmp_path))  # the name of earlier versions: no longer read
    assert data.data_dir() == ROOT / "data" / "cache"


@pytest.mark.parametrize("name", ALL_FILES)
@pytest.mark.parametrize("split", FILES)
def test_one_changed_byte_fails_the_checksum(copy, name, split):
    path = copy / name
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=rf"{name}.*checksum"):
        load_fashion_mnist_mini(split, root=copy)


@pytest.mark.parametrize("name", [*ALL_FILES, "SHA256SUMS"])
def test_missing_file(copy, name):
    (copy / name).unlink()
    with pytest.raises(DataError, match=rf"{name} is missing"):
        load_fashion_mnist_mini("train", root=copy)


def test_unknown_split():
    with pytest.raises(ValueError, match=r"unknown split 'validation'.*'train' or 'test'"):
        load_fashion_mnist_mini("validation")


def test_read_idx_rejects_bad_files(tmp_path):
    not_idx = tmp_path / "image.png"
    not_idx.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(DataError, match="not an unsigned-byte IDX file"):
        read_idx(not_idx)
    truncated = tmp_path / "labels.gz"
    truncated.write_bytes(gzip.compress(bytes([0, 0, 8, 1]) + (100).to_bytes(4, "big") + bytes(99)))
    with pytest.raises(DataError, match=r"truncated.*\(100,\).*99"):
        read_idx(truncated)


@pytest.mark.skipif(
    not FULL_SET.exists(), reason=f"the full Fashion-MNIST is not at {FULL_SET} (make full-fashion-mnist)"
)
def test_script_rebuilds_the_bundled_files_byte_for_byte(tmp_path):
    script = ROOT / "scripts" / "make_fashion_mnist_mini.py"
    subprocess.run(
        [sys.executable, str(script), "--source", str(FULL_SET), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (tmp_path / "SHA256SUMS").read_bytes() == (BUNDLED / "SHA256SUMS").read_bytes()
    for name in ALL_FILES:
        assert (tmp_path / name).read_bytes() == (BUNDLED / name).read_bytes(), name
