"""vitlib.data: batches are a pure function of (seed, epoch, step), an epoch can start at any step (resume), a global
batch is sharded across processes, images are normalised and augmented reproducibly."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from vitlib.data import (
    FolderLoader,
    TensorLoader,
    TensorSplit,
    check_augment,
    get_dataset,
    random_crop_flip,
    random_resized_crop_flip,
)

MEAN, STD = (0.5,), (0.25,)


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest.one_thread


def numbered(n: int = 100, size: int = 8) -> TensorSplit:
    """Image k is filled with k (mod 256) and labelled k: a batch tells which examples it holds."""
    images = (torch.arange(n) % 256).to(torch.uint8).view(n, 1, 1, 1).expand(n, 1, size, size).contiguous()
    return TensorSplit(images, torch.arange(n))


def batches(loader, epoch: int = 0, start: int = 0):
    return list(loader.epoch(epoch, start))


def assert_same(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


# ------------------------------------------------------------------------------------------------------- order
def test_same_seed_and_epoch_give_the_same_batches():
    make = lambda seed: TensorLoader(numbered(), 16, MEAN, STD, shuffle=True, seed=seed)
    assert_same(batches(make(0), epoch=3), batches(make(0), epoch=3))
    order = lambda loader, epoch: torch.cat([y for _, y in batches(loader, epoch)])
    assert not torch.equal(order(make(0), 3), order(make(0), 4))  # another epoch, another order
    assert not torch.equal(order(make(0), 3), order(make(1), 3))  # another seed, another order
    assert sorted(order(make(0), 3).tolist()) == list(range(100))  # each epoch visits every example once


def test_without_shuffle_the_order_is_the_data_order():
    loader = TensorLoader(numbered(), 16, MEAN, STD, shuffle=False)
    assert torch.cat([y for _, y in batches(loader, epoch=5)]).tolist() == list(range(100))


@pytest.mark.parametrize("start", [1, 3, 6])
def test_an_epoch_can_start_at_any_step(start):
    loader = TensorLoader(numbered(), 16, MEAN, STD, shuffle=True, seed=2, augment="crop-flip")
    full = batches(loader, epoch=1)
    assert len(full) == 7
    assert_same(batches(loader, epoch=1, start=start), full[start:])


def test_drop_last_lengths():
    keep = TensorLoader(numbered(100), 32, MEAN, STD, drop_last=False)
    drop = TensorLoader(numbered(100), 32, MEAN, STD, drop_last=True, shuffle=True)
    assert (len(keep), len(drop)) == (4, 3)
    assert [len(y) for _, y in batches(keep)] == [32, 32, 32, 4]
    assert [len(y) for _, y in batches(drop)] == [32, 32, 32]
    exact = TensorLoader(numbered(96), 32, MEAN, STD, drop_last=True)
    assert len(exact) == 3 == len(batches(exact))


# --------------------------------------------------------------------------------------------- normalisation
def test_batches_are_normalised_floats():
    d = get_dataset("fashion-mnist-mini")
    loader = TensorLoader(d.train, 1000, d.mean, d.std)
    images = torch.cat([x for x, _ in batches(loader)])
    assert images.dtype == torch.float32 and images.shape == (9000, 1, 28, 28)
    assert abs(images.mean().item()) < 0.02 and abs(images.std().item() - 1) < 0.02
    x, _ = next(TensorLoader(numbered(4), 4, MEAN, STD).epoch(0))
    assert torch.allclose(x[:, 0, 0, 0], (torch.arange(4) / 255 - 0.5) / 0.25)


# ------------------------------------------------------------------------------------------------ augmentation
def crops_and_flips(image: torch.Tensor, pad: int):
    """Every translation by up to `pad` pixels (zero padding) of `image`, flipped or not."""
    h, w = image.shape[-2:]
    padded = torch.nn.functional.pad(image, (pad, pad, pad, pad))
    for flip in (False, True):
        source = padded.flip(-1) if flip else padded
        for dy in range(2 * pad + 1):
            for dx in range(2 * pad + 1):
                yield source[..., dy : dy + h, dx : dx + w]


def test_crop_flip_is_a_translation_and_flip_of_each_image():
    d = get_dataset("fashion-mnist-mini", subset=64)
    plain = TensorLoader(d.train, 64, (0,), (1 / 255,))  # normalisation off: raw pixel values
    aug = TensorLoader(d.train, 64, (0,), (1 / 255,), augment="crop-flip", seed=3)
    ((x, y),) = batches(plain)
    ((xa, ya),) = batches(aug)
    assert xa.shape == x.shape and torch.equal(y, ya)
    assert not torch.equal(xa, x)
    changed = sum(not torch.equal(a, b) for a, b in zip(xa, x))
    assert changed > 48  # 1 in 2 * 7 * 7 crops is the identity
    for a, b in zip(xa[:16], x[:16]):
        assert any(torch.allclose(a, c, atol=1e-3) for c in crops_and_flips(b, pad=3))


@pytest.mark.parametrize("augment", ["crop-flip", "rrc-flip", "randaugment"])
def test_augmentation_is_reproducible_per_seed_epoch_and_step(augment):
    split = get_dataset("fashion-mnist-mini", subset=64).train
    make = lambda seed: TensorLoader(split, 32, (0.3,), (0.35,), shuffle=True, augment=augment, seed=seed)
    a, b = batches(make(1), epoch=2), batches(make(1), epoch=2)
    assert_same(a, b)
    assert not torch.equal(a[0][0], batches(make(2), epoch=2)[0][0])
    plain = TensorLoader(split, 32, (0.3,), (0.35,), shuffle=True, seed=1)
    assert not torch.equal(a[0][0], batches(plain, epoch=2)[0][0])
    assert a[0][0].shape == (32, 1, 28, 28)
    # the same images in another epoch are augmented differently
    fixed = TensorLoader(split, 32, (0.3,), (0.35,), augment=augment, seed=1)
    (x0, y0), (x1, y1) = batches(fixed, epoch=0)[0], batches(fixed, epoch=1)[0]
    assert torch.equal(y0, y1) and not torch.equal(x0, x1)


def test_random_crop_flip_on_a_batch_of_one_keeps_the_content():
    image = torch.arange(36, dtype=torch.float32).view(1, 1, 6, 6)
    g = torch.Generator().manual_seed(0)
    out = [random_crop_flip(image, g, pad=1) for _ in range(40)]
    assert all(o.shape == image.shape for o in out)
    assert len({tuple(o.flatten().tolist()) for o in out}) > 5  # several of the 18 crops and flips appear
    assert all(any(torch.equal(o, c) for c in crops_and_flips(image, 1)) for o in out)


def test_random_resized_crop_flip_is_the_identity_or_a_flip_at_full_scale_and_zooms_in_otherwise():
    images = torch.rand(16, 1, 8, 8)
    g = torch.Generator().manual_seed(0)
    whole = random_resized_crop_flip(images, g, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    assert all(
        torch.allclose(o, x, atol=1e-5) or torch.allclose(o, x.flip(-1), atol=1e-5) for o, x in zip(whole, images)
    )
    assert 2 <= sum(torch.allclose(o, x, atol=1e-5) for o, x in zip(whole, images)) <= 14  # both appear
    # a box of a quarter of the area: a linear ramp along the columns comes out with a smaller range of values
    ramp = torch.linspace(0, 1, 8).expand(16, 1, 8, 8).contiguous()
    zoomed = random_resized_crop_flip(ramp, torch.Generator().manual_seed(1), scale=(0.25, 0.25), ratio=(1.0, 1.0))
    spans = zoomed.amax(dim=(1, 2, 3)) - zoomed.amin(dim=(1, 2, 3))
    assert torch.all(spans < 0.6) and torch.all(zoomed >= 0) and torch.all(zoomed <= 1)
    # the rows of a shard are the rows of the whole batch
    full = random_resized_crop_flip(images, torch.Generator().manual_seed(2))
    part = random_resized_crop_flip(images[4:8], torch.Generator().manual_seed(2), offset=4, total=16)
    assert torch.allclose(part, full[4:8])


def test_unknown_augmentation_is_refused():
    with pytest.raises(ValueError, match="crop-flip"):
        check_augment("bar")
    with pytest.raises(ValueError, match="randaugment"):
        TensorLoader(numbered(), 8, MEAN, STD, augment="autoaugment")


# ----------------------------------------------------------------------------------------------------- sharding
@pytest.mark.parametrize("augment", ["none", "crop-flip", "rrc-flip", "randaugment"])
def test_ranks_share_out_the_global_batch(augment):
    split = get_dataset("fashion-mnist-mini", subset=96).train
    kw = dict(batch_size=32, mean=(0.3,), std=(0.35,), shuffle=True, augment=augment, seed=4, drop_last=True)
    whole = batches(TensorLoader(split, **kw), epoch=1)
    ranks = [batches(TensorLoader(split, rank=r, world_size=2, **kw), epoch=1) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(whole) == 3
    for (x, y), (x0, y0), (x1, y1) in zip(whole, *ranks):
        assert len(y0) == len(y1) == 16
        assert torch.equal(torch.cat([y0, y1]), y)
        assert torch.equal(torch.cat([x0, x1]), x)


def test_global_batch_must_split_evenly():
    with pytest.raises(ValueError, match="divisible"):
        TensorLoader(numbered(), 30, MEAN, STD, world_size=4)


# ------------------------------------------------------------------------------------------ folders of images
class Indexed(torch.utils.data.Dataset):
    """Image k is a grey square of value k, labelled k."""

    def __init__(self, n: int):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, k):
        return Image.new("RGB", (8, 8), (k, k, k)), k


def test_folder_loader_orders_like_the_tensor_loader():
    folder = FolderLoader(Indexed(50), 8, 16, MEAN * 3, STD * 3, shuffle=True, seed=7, drop_last=True, num_workers=0)
    tensor = TensorLoader(numbered(50), 16, MEAN, STD, shuffle=True, seed=7, drop_last=True)
    assert len(folder) == len(tensor) == 3
    for epoch in (0, 1):
        got = batches(folder, epoch)
        assert [y.tolist() for _, y in got] == [y.tolist() for _, y in batches(tensor, epoch)]
        x, y = got[0]
        assert x.shape == (16, 3, 8, 8) and x.dtype == torch.float32
        assert torch.allclose(x[:, 0, 4, 4], (y / 255 - 0.5) / 0.25, atol=1e-5)  # the label's grey value, normalised
    assert [y.tolist() for _, y in batches(folder, 1, start=2)] == [y.tolist() for _, y in batches(folder, 1)[2:]]
    ranks = [
        batches(
            FolderLoader(
                Indexed(50),
                8,
                16,
                MEAN * 3,
                STD * 3,
                shuffle=True,
                seed=7,
                drop_last=True,
                rank=r,
                world_size=2,
                num_workers=0,
            ),
            1,
        )
        for r in (0, 1)
    ]
    for (x, y), (x0, y0), (x1, y1) in zip(batches(folder, 1), *ranks):
        assert torch.equal(torch.cat([y0, y1]), y) and torch.equal(torch.cat([x0, x1]), x)


def write_image_folder(root, n_train: int, n_val: int, size: int = 12):
    for split, n in (("train", n_train), ("val", n_val)):
        for c, name in enumerate(("cat", "dog")):
            (root / split / name).mkdir(parents=True)
            for k in range(n):
                Image.new("RGB", (size, size), (40 * k, 100 * c, 0)).save(root / split / name / f"{k}.png")
    return root


def test_folder_loader_on_an_image_folder(tmp_path):
    root = write_image_folder(tmp_path / "pets", n_train=5, n_val=3)
    d = get_dataset(f"imagefolder:{root}", val_fraction=0, image_size=16)
    train = FolderLoader(
        d.train, 16, 4, d.mean, d.std, shuffle=True, augment="crop-flip", seed=0, drop_last=True, num_workers=0
    )
    test = FolderLoader(d.test, 16, 4, d.mean, d.std, num_workers=0)
    assert (len(train), len(test)) == (2, 2)
    got = batches(train, 0)
    assert all(x.shape == (4, 3, 16, 16) for x, _ in got)
    order = TensorLoader(numbered(10), 4, MEAN, STD, shuffle=True, seed=0).order(0)
    assert torch.cat([y for _, y in got]).tolist() == [d.train.targets[i] for i in order[:8]]
    x, y = zip(*batches(test, 0))
    assert torch.cat(y).tolist() == [0, 0, 0, 1, 1, 1]
    assert x[0].shape == (4, 3, 16, 16) and x[1].shape == (2, 3, 16, 16)


class Textured(Indexed):
    """Image k is noise seeded by k: crops, flips and colour changes show."""

    def __getitem__(self, k):
        pixels = torch.randint(0, 256, (8, 8, 3), generator=torch.Generator().manual_seed(k), dtype=torch.uint8)
        return Image.fromarray(pixels.numpy()), k


@pytest.mark.parametrize("augment", ["crop-flip", "randaugment"])
def test_folder_loader_augments_by_seed_epoch_and_step(augment):
    make = lambda seed=3, workers=0, **kw: FolderLoader(
        Textured(24),
        8,
        8,
        MEAN * 3,
        STD * 3,
        shuffle=True,
        augment=augment,
        seed=seed,
        drop_last=True,
        num_workers=workers,
        **kw,
    )
    torch.manual_seed(0)
    a = batches(make(), 1)
    torch.manual_seed(1)  # the global RNG plays no part
    assert_same(a, batches(make(), 1))
    assert not torch.equal(a[0][0], batches(make(seed=4), 1)[0][0])
    assert_same(batches(make(), 1, start=1), a[1:])  # a resumed epoch sees the same augmented images
    assert_same(batches(make(workers=2), 1), a)  # worker processes draw nothing of their own
    ranks = [batches(make(rank=r, world_size=2), 1) for r in (0, 1)]
    for (x, y), (x0, y0), (x1, y1) in zip(a, *ranks):
        assert torch.equal(torch.cat([y0, y1]), y) and torch.equal(torch.cat([x0, x1]), x)
