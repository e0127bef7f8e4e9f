"""vitlib.data: the registry of data sets, stratified splits and subsets, and the real loading code of every source
(MNIST IDX files, CIFAR pickles, folders of images) run offline on small data each test writes itself."""

from __future__ import annotations

import gzip
import hashlib
import pickle
import shutil

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

from vitlib.data import (
    DataError,
    Dataset,
    TensorSplit,
    dataset_names,
    get_dataset,
    stratified_indices,
    synthetic_position,
    synthetic_relation,
    with_train,
    with_val,
)


@pytest.fixture(scope="module")
def mini() -> Dataset:
    return get_dataset("fashion-mnist-mini", val_fraction=0.1)


# ------------------------------------------------------------------------------------------- the bundled subset
def test_fashion_mnist_mini_sizes_and_balance(mini):
    assert mini.in_memory and mini.num_classes == 10 and mini.in_channels == 1 and mini.image_size == 28
    assert (len(mini.train), len(mini.val), len(mini.test)) == (9000, 1000, 2000)
    assert mini.train.labels.bincount(minlength=10).tolist() == [900] * 10
    assert mini.val.labels.bincount(minlength=10).tolist() == [100] * 10
    assert mini.test.labels.bincount(minlength=10).tolist() == [200] * 10
    for split in (mini.train, mini.val, mini.test):
        assert split.images.dtype == torch.uint8 and split.images.shape[1:] == (1, 28, 28)
        assert split.labels.dtype == torch.int64


def test_validation_split_is_disjoint_from_training(mini):
    train = {hashlib.md5(im.numpy().tobytes()).hexdigest() for im in mini.train.images}
    val = {hashlib.md5(im.numpy().tobytes()).hexdigest() for im in mini.val.images}
    assert len(train) == 9000 and len(val) == 1000 and not train & val
    whole = get_dataset("fashion-mnist-mini", val_fraction=0)
    assert whole.val is None and len(whole.train) == 10_000


def test_subset_by_fraction_and_by_count_is_stratified():
    by_fraction = get_dataset("fashion-mnist-mini", subset=0.1)
    assert len(by_fraction.train) == 900
    assert by_fraction.train.labels.bincount(minlength=10).tolist() == [90] * 10
    by_count = get_dataset("fashion-mnist-mini", subset=500)
    assert len(by_count.train) == 500
    assert by_count.train.labels.bincount(minlength=10).tolist() == [50] * 10
    assert len(by_count.val) == 1000 and len(by_count.test) == 2000  # the subset is of the training part only


def test_stratified_indices_are_seeded():
    labels = torch.arange(10).repeat_interleave(100)
    a, b, c = (stratified_indices(labels, 0.2, seed=s) for s in (0, 0, 1))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.equal(a, a.sort().values) and len(a.unique()) == len(a) == 200
    assert labels[a].bincount().tolist() == [20] * 10
    # an uneven count is shared out by largest remainder: 13 of 3 equal classes -> 5, 4, 4 in some order
    three = torch.arange(3).repeat_interleave(10)
    assert sorted(three[stratified_indices(three, 13)].bincount().tolist()) == [4, 4, 5]
    with pytest.raises(ValueError, match="between 1 and 1000"):
        stratified_indices(labels, 5000)


def test_subset_seed_changes_which_images():
    a, b, c = (get_dataset("fashion-mnist-mini", subset=200, seed=s).train for s in (3, 3, 4))
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)


def test_image_size_resizes_every_split():
    d = get_dataset("fashion-mnist-mini", image_size=32, subset=100)
    assert d.image_size == 32
    for split in (d.train, d.val, d.test):
        assert split.images.shape[1:] == (1, 32, 32) and split.images.dtype == torch.uint8


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        get_dataset("imagenet-21k")
    for name in dataset_names():
        assert name in str(err.value)
    assert "fashion-mnist-mini" in dataset_names() and "imagefolder:<path>" in dataset_names()


# --------------------------------------------------------------------------------------------- missing or corrupt
@pytest.mark.parametrize(
    "name, folder", [("mnist", "MNIST"), ("cifar10", "cifar-10-batches-py"), ("cifar100", "cifar-100-python")]
)
def test_missing_data_offline_says_where_and_what_to_do(tmp_path, name, folder):
    with pytest.raises(DataError) as err:
        get_dataset(name, root=tmp_path)
    message = str(err.value)
    assert name in message and str(tmp_path) in message and folder in message
    assert "fashion-mnist-mini" in message and "download=True" in message


def _idx(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_fake_mnist(raw, n_train=20, n_test=10):
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 28, 28)),
        "train-labels-idx1-ubyte.gz": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 28, 28)),
        "t10k-labels-idx1-ubyte.gz": np.arange(n_test) % 10,
    }
    for name, array in arrays.items():
        (raw / name).write_bytes(gzip.compress(_idx(array), mtime=0))
    return arrays


def test_corrupt_idx_file_fails_its_checksum(tmp_path):
    _write_fake_mnist(tmp_path / "MNIST" / "raw")  # well-formed IDX files, but not the real ones
    with pytest.raises(DataError, match="checksum") as err:
        get_dataset("mnist", root=tmp_path)
    assert "train-images-idx3-ubyte.gz" in str(err.value)


def test_idx_files_load_when_their_checksums_match(tmp_path, monkeypatch):
    """The real IDX reading path of MNIST: fake files, with torchvision's md5 list pointed at them."""
    raw = tmp_path / "MNIST" / "raw"
    arrays = _write_fake_mnist(raw)
    resources = [
        (f"https://example.invalid/{name}", hashlib.md5((raw / name).read_bytes()).hexdigest()) for name in arrays
    ]
    monkeypatch.setattr(torchvision.datasets.MNIST, "resources", resources)
    d = get_dataset("mnist", root=tmp_path, val_fraction=0)
    assert d.classes == tuple("0123456789") and d.info["source"] == str(raw)
    assert d.train.images.shape == (20, 1, 28, 28) and d.test.images.shape == (10, 1, 28, 28)
    assert torch.equal(d.train.images[:, 0], torch.from_numpy(arrays["train-images-idx3-ubyte.gz"].astype(np.uint8)))
    assert d.test.labels.tolist() == list(range(10))
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b not gzip at all")
    with pytest.raises(DataError, match="checksum"):
        get_dataset("mnist", root=tmp_path)


# ---------------------------------------------------------------------------------------------------- CIFAR-10
def _write_fake_cifar10(root, monkeypatch, n_per_batch=4):
    """cifar-10-batches-py as torchvision reads it: latin1 pickles of {'data': (N, 3072) uint8 in CHW order,
    'labels': [...]} and batches.meta {'label_names': [...]}; torchvision's md5 lists point at these files."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    cls = torchvision.datasets.CIFAR10
    names = [f"class{i}" for i in range(10)]
    made, sums = {}, {}
    for k, (file_name, _) in enumerate(cls.train_list + cls.test_list):
        data = (np.arange(n_per_batch * 3072).reshape(n_per_batch, 3072) + k) % 251
        labels = [(k + i) % 10 for i in range(n_per_batch)]
        (folder / file_name).write_bytes(pickle.dumps({"data": data.astype(np.uint8), "labels": labels}))
        made[file_name] = (data.astype(np.uint8), labels)
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": names}))
    for path in folder.iterdir():
        sums[path.name] = hashlib.md5(path.read_bytes()).hexdigest()
    monkeypatch.setattr(cls, "train_list", [[n, sums[n]] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, sums[n]] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": sums["batches.meta"]})
    return folder, made, names


def test_cifar10_loads_from_its_pickled_batches(tmp_path, monkeypatch):
    folder, made, names = _write_fake_cifar10(tmp_path, monkeypatch)
    d = get_dataset("cifar10", root=tmp_path, val_fraction=0)
    assert d.classes == tuple(names) and d.in_channels == 3 and d.image_size == 32
    assert d.train.images.shape == (20, 3, 32, 32) and d.test.images.shape == (4, 3, 32, 32)
    assert d.train.images.dtype == torch.uint8
    data, labels = made["test_batch"]
    assert torch.equal(d.test.images, torch.from_numpy(data).view(4, 3, 32, 32))  # CHW rows -> (N, C, H, W)
    assert d.test.labels.tolist() == labels
    assert d.train.labels.tolist() == [
        lab
        for n in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5")
        for lab in made[n][1]
    ]
    assert d.mean == pytest.approx((0.4914, 0.4822, 0.4465))


def test_cifar10_with_a_corrupt_batch_is_a_data_error(tmp_path, monkeypatch):
    folder, _, _ = _write_fake_cifar10(tmp_path, monkeypatch)
    (folder / "data_batch_3").write_bytes(b"truncated")
    with pytest.raises(DataError, match="checksum") as err:
        get_dataset("cifar10", root=tmp_path)
    assert "cifar10" in str(err.value) and "fashion-mnist-mini" in str(err.value)


# ------------------------------------------------------------------------------------------- folders of images
def write_image_folder(root, n_train=6, n_val=3, size=12, splits=("train", "val")):
    """root/{train,val}/{cat,dog}/k.png: cats dark, dogs bright, each image a different shade."""
    for split, n in zip(splits, (n_train, n_val)):
        for c, name in enumerate(("cat", "dog")):
            (root / split / name).mkdir(parents=True)
            for k in range(n):
                value = 20 + 10 * k + 150 * c
                Image.new("RGB", (size, size), (value, value // 2, 255 - value)).save(
                    root / split / name / f"{k:02d}.png"
                )
    return root


def test_imagefolder_loads_train_and_val(tmp_path):
    root = write_image_folder(tmp_path / "pets")
    d = get_dataset(f"imagefolder:{root}", val_fraction=0, image_size=16)
    assert d.classes == ("cat", "dog") and not d.in_memory and d.in_channels == 3 and d.image_size == 16
    assert (len(d.train), len(d.test)) == (12, 6) and d.val is None
    image, label = d.train[len(d.train) - 1]
    assert label == 1 and image.size == (12, 12)
    split = get_dataset(f"imagefolder:{root}", val_fraction=0.5, image_size=16)
    assert (len(split.train), len(split.val)) == (6, 6)  # a stratified half of the training folder
    assert sorted(split.val[i][1] for i in range(6)) == [0, 0, 0, 1, 1, 1]


def test_imagefolder_accepts_test_instead_of_val(tmp_path):
    root = write_image_folder(tmp_path / "pets", splits=("train", "test"))
    assert len(get_dataset(f"imagefolder:{root}", val_fraction=0).test) == 6


def test_imagefolder_without_train_is_a_data_error(tmp_path):
    root = write_image_folder(tmp_path / "pets", splits=("training", "val"))
    with pytest.raises(DataError, match="train/") as err:
        get_dataset(f"imagefolder:{root}")
    assert "training" in str(err.value)
    with pytest.raises(DataError, match="not a folder"):
        get_dataset(f"imagefolder:{tmp_path / 'nowhere'}")


def test_an_image_folder_with_one_class_or_an_unreadable_image_is_a_data_error(tmp_path):
    """issue 60: one class trained to "acc 1.0000"; a truncated PNG or a text file named .png ended in a PIL
    traceback that did not name the file."""
    from vitlib.data import FolderLoader

    one = write_image_folder(tmp_path / "one")
    for split in ("train", "val"):
        shutil.rmtree(one / split / "dog")
    with pytest.raises(DataError, match="1 class: a classifier needs at least two"):
        get_dataset(f"imagefolder:{one}")
    root = write_image_folder(tmp_path / "pets")
    (root / "train" / "cat" / "00.png").write_text("not an image")
    truncated = (root / "train" / "dog" / "01.png").read_bytes()
    (root / "train" / "dog" / "01.png").write_bytes(truncated[: len(truncated) // 2])
    d = get_dataset(f"imagefolder:{root}", val_fraction=0, image_size=16)
    for workers in (0, 1):
        loader = FolderLoader(d.train, 16, 4, d.mean, d.std, num_workers=workers)
        with pytest.raises(DataError, match=r"cat/00\.png cannot be read as an image .*: remove or replace it\.$"):
            list(loader.epoch(0))


def test_labels_must_fit_the_classes_and_the_images():
    """issue 60: a label of 12 in a 10-class set crashed at the first step; 9,990 labels for 10,000 images trained."""
    from vitlib.data import TensorSplit
    from vitlib.data.splits import check_labels

    with pytest.raises(DataError, match="10 images but 9 labels"):
        TensorSplit(torch.zeros(10, 1, 4, 4, dtype=torch.uint8), torch.zeros(9, dtype=torch.long))
    d = get_dataset("fashion-mnist-mini", val_fraction=0)
    d.train.labels[3] = 12
    with pytest.raises(
        DataError, match=r"the train split of 'fashion-mnist-mini' has labels 0\.\.12, but the data set has 10"
    ):
        check_labels(d)


def test_idx_files_of_the_wrong_shape_and_a_damaged_checksum_file_are_data_errors(tmp_path):
    from vitlib.data.files import FILES, read_idx_split, verify_checksums

    def idx(path, array):
        header = bytes([0, 0, 8, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
        path.write_bytes(header + array.astype(np.uint8).tobytes())

    images, labels = FILES["train"]
    idx(tmp_path / images, np.zeros(784 * 3))  # one dimension (read_idx reads a file that is not gzip as it is)
    idx(tmp_path / labels, np.zeros(3))
    with pytest.raises(DataError, match=r"images \(2352,\) and labels \(3,\); they must be \(N, rows, cols\)"):
        read_idx_split(tmp_path, "train")
    (tmp_path / "SHA256SUMS").write_text("abc123\n")
    with pytest.raises(DataError, match="SHA256SUMS line 1 is 'abc123', not '<sha256>  <file>'"):
        verify_checksums(tmp_path)


# ------------------------------------------------------------------------------------------ synthetic-position
def test_synthetic_position_is_seeded():
    a, b, c = synthetic_position(64, seed=5), synthetic_position(64, seed=5), synthetic_position(64, seed=6)
    assert torch.equal(a.images, b.images) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.images, c.images)


def test_synthetic_position_marks_the_labelled_quadrant():
    s = synthetic_position(400, size=32, mark=4, seed=0)
    assert isinstance(s, TensorSplit) and s.images.shape == (400, 1, 32, 32)
    assert set(s.labels.tolist()) == {0, 1, 2, 3}
    assert s.labels.bincount().min() > 60  # roughly balanced
    for image, label in zip(s.images[:, 0], s.labels):
        qy, qx = divmod(int(label), 2)
        quadrants = image.view(2, 16, 2, 16).permute(0, 2, 1, 3)  # (qy, qx, 16, 16)
        bright = (quadrants == 255).flatten(2).sum(-1)
        assert bright[qy, qx] == 16  # one 4x4 mark of 255 in the labelled quadrant
        assert bright.sum() == 16  # and nowhere else: the noise stays below 0.6 * 255
        ys, xs = torch.nonzero(quadrants[qy, qx] == 255, as_tuple=True)
        assert int(ys.min()) % 4 == 0 and int(xs.min()) % 4 == 0  # on the 4-pixel grid


def test_synthetic_position_dataset_depends_on_seed():
    a, b = get_dataset("synthetic-position", seed=0), get_dataset("synthetic-position", seed=1)
    assert (len(a.train), len(a.val), len(a.test)) == (9000, 1000, 2000)
    assert a.classes == ("top-left", "top-right", "bottom-left", "bottom-right") and a.image_size == 32
    assert not torch.equal(a.train.images[:10], b.train.images[:10])
    assert not torch.equal(a.test.images[:10], a.train.images[:10])  # the test set has its own seed


def test_with_val_watches_the_first_or_a_seeded_random_n_and_leaves_train_and_test(mini):
    first = with_val(mini, 100)
    assert torch.equal(first.val.images, mini.val.images[:100]) and torch.equal(first.val.labels, mini.val.labels[:100])
    assert first.train is mini.train and first.test is mini.test
    drawn = with_val(mini, 100, seed=3)
    keep = torch.randperm(len(mini.val), generator=torch.Generator().manual_seed(3))[:100].sort().values
    assert torch.equal(drawn.val.labels, mini.val.labels[keep]) and torch.equal(drawn.val.images, mini.val.images[keep])
    assert torch.equal(with_val(mini, 100, seed=3).val.images, drawn.val.images)  # seeded
    assert not torch.equal(drawn.val.images, first.val.images)
    for everything in (0, None, len(mini.val), 10 * len(mini.val)):
        assert with_val(mini, everything) is mini
    # with_train's val is with_val's n: the same images watched
    assert torch.equal(with_train(mini, torch.arange(50), val=100).val.images, first.val.images)
    assert len(with_train(mini, torch.arange(50), val=0).val) == len(mini.val)
    with pytest.raises(ValueError, match="positive number of validation images"):
        with_val(mini, -5)


def test_the_relation_task_needs_two_distant_glyphs_compared():
    split = synthetic_relation(400, seed=3)
    assert split.images.shape == (400, 1, 32, 32) and 0.4 < split.labels.float().mean() < 0.6
    bright = split.images[:, 0] == 255
    cells = bright.reshape(400, 4, 8, 4, 8).any(dim=(2, 4))  # which of the 4x4 cells hold a glyph
    assert (cells.sum(dim=(1, 2)) == 2).all()  # exactly two glyphs per image
    where = [torch.nonzero(c) for c in cells]
    assert all((w[0] - w[1]).abs().max() >= 2 for w in where)  # at least two cells apart
    assert torch.equal(synthetic_relation(50, seed=3).images, synthetic_relation(50, seed=3).images)
    data = get_dataset("synthetic-relation", val_fraction=0.1)
    assert data.num_classes == 2 and data.image_size == 32 and len(data.test) == 4000
