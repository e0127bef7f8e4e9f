"""Batches for training and evaluation: `TensorLoader` serves an in-memory `TensorSplit` (one index per batch, on the
GPU when there is one), `FolderLoader` image files through DataLoader workers. Both give the same batches for the same
(seed, epoch, step), shard a global batch across DDP ranks, and can start mid-epoch (resume)."""

from __future__ import annotations

import math
import signal

import torch
import torchvision.transforms.v2 as T

from .augment import (
    RANDAUGMENT_GROUPS,
    batch_seed,
    check_augment,
    folder_transforms,
    random_crop_flip,
    random_resized_crop_flip,
)
from .files import DataError
from .splits import TensorSplit


class ShardedBatches:
    """What both loaders share (their keyword options): `size` examples in batches of a global `batch_size`, of which
    each of `world_size` processes takes its `rank`-th share, in a seeded order per epoch, augmented by `augment`."""

    def __init__(
        self, size: int, batch_size: int, *, shuffle=False, augment="none", seed=0, drop_last=False, device="cpu",
        rank=0, world_size=1,
    ):  # fmt: skip
        if batch_size % world_size:
            raise ValueError(f"batch size {batch_size} must be divisible by the number of processes ({world_size}).")
        self.size, self.batch_size, self.shuffle, self.seed, self.drop_last = size, batch_size, shuffle, seed, drop_last
        self.device, self.rank, self.world_size = torch.device(device), rank, world_size
        self.augment = check_augment(augment)

    def __len__(self) -> int:
        return self.size // self.batch_size if self.drop_last else math.ceil(self.size / self.batch_size)

    def order(self, epoch: int) -> torch.Tensor:
        """The example order of `epoch` (a permutation drawn from (seed, epoch), or 0..size-1), on the CPU."""
        if not self.shuffle:
            return torch.arange(self.size)
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed * 7919 + epoch))


class TensorLoader(ShardedBatches):
    """Batches of a TensorSplit held on `device` as uint8 (a batch is an index): augmented, normalised floats. On a
    GPU the batch's `randaugment_groups` groups share a RandAugment draw (on the CPU each image has its own)."""

    def __init__(self, split: TensorSplit, batch_size: int, mean, std, *, randaugment_groups=None, **options):
        super().__init__(len(split), batch_size, **options)
        if randaugment_groups is not None and randaugment_groups < 1:
            raise ValueError(
                f"randaugment_groups must be at least 1 (or None: per image on the CPU, "
                f"{RANDAUGMENT_GROUPS} groups on a GPU), got {randaugment_groups}."
            )
        if randaugment_groups is None and self.device.type == "cuda":
            randaugment_groups = RANDAUGMENT_GROUPS
        self.randaugment_groups, self.split = randaugment_groups, split.to(self.device)
        self.mean = torch.tensor(mean, device=self.device).view(1, -1, 1, 1) * 255
        self.std = torch.tensor(std, device=self.device).view(1, -1, 1, 1) * 255
        self._randaugment = T.RandAugment()

    def batch(self, order: torch.Tensor, epoch: int, step: int):
        idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        total, offset = len(idx), 0
        if self.world_size > 1:
            shards = idx.tensor_split(self.world_size)
            idx, offset = shards[self.rank], sum(len(s) for s in shards[: self.rank])
        images, labels = self.split.images[idx], self.split.labels[idx]
        if self.augment != "none":
            # random draws for the whole global batch, of which this process uses its rows: sharded or not, the
            # global batch is augmented the same way (and no two processes repeat each other's crops)
            g = torch.Generator().manual_seed(batch_seed(self.seed, epoch, step))
            if self.augment == "randaugment" and self.randaugment_groups:
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(batch_seed(self.seed, epoch, step) + self.rank)
                    parts = images.tensor_split(min(self.randaugment_groups, len(images)))
                    images = torch.cat([self._randaugment(part) for part in parts])
            elif self.augment == "randaugment":
                seeds = torch.randint(0, 2**62, (total,), generator=g)[offset : offset + len(idx)].tolist()
                with torch.random.fork_rng(devices=[]):
                    augmented = []
                    for image, seed in zip(images, seeds):
                        torch.manual_seed(seed)
                        augmented.append(self._randaugment(image))
                images = torch.stack(augmented)
            if self.device.type == "cuda":
                g = torch.Generator(device=self.device).manual_seed(batch_seed(self.seed, epoch, step))
            if self.augment == "rrc-flip":
                images = random_resized_crop_flip(images, g, offset=offset, total=total)
            else:
                images = random_crop_flip(images, g, pad=max(1, images.shape[-1] // 8), offset=offset, total=total)
        return (images.float() - self.mean) / self.std, labels

    def epoch(self, epoch: int = 0, start: int = 0):
        """Iterate over the batches of `epoch`, from step `start` on."""
        order = self.order(epoch).to(self.device)
        for step in range(start, len(self)):
            yield self.batch(order, epoch, step)


class FolderLoader(ShardedBatches):
    """Batches of a torchvision image dataset read by DataLoader workers; same order and sharding as TensorLoader."""

    def __init__(self, dataset, image_size: int, batch_size: int, mean, std, *, num_workers: int = 4, **options):
        super().__init__(len(dataset), batch_size, **options)
        self.dataset, self.num_workers = dataset, num_workers
        self.transform = folder_transforms(image_size, mean, std, self.shuffle, self.augment)

    def _shard(self, order: torch.Tensor, epoch: int, step: int) -> list[tuple[int, int]]:
        """(index, augmentation seed) of this process's images of a step: the seeds are drawn for the global batch, so
        augmentation depends on (seed, epoch, step, position) only, not on workers, sharding or where a run resumed."""
        idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        g = torch.Generator().manual_seed(batch_seed(self.seed, epoch, step))
        seeds = torch.randint(0, 2**62, (len(idx),), generator=g)
        idx, seeds = (t.tensor_split(self.world_size)[self.rank].tolist() for t in (idx, seeds))
        return list(zip(idx, seeds))

    def epoch(self, epoch: int = 0, start: int = 0):
        """Iterate over the batches of `epoch`, from step `start` on (read and transformed by the workers)."""
        order = self.order(epoch)
        mine = [self._shard(order, epoch, s) for s in range(start, len(self))]
        loader = torch.utils.data.DataLoader(
            _SeededImages(self.dataset, self.transform),
            batch_sampler=mine,
            num_workers=self.num_workers,
            pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(batch_seed(self.seed, epoch, start)),
            worker_init_fn=_ignore_ctrl_c,
        )
        try:
            for images, labels in loader:
                yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)
        except DataError as exc:  # from a worker: its message is the last line of the worker's traceback
            raise DataError(str(exc).strip().splitlines()[-1].split("DataError: ", 1)[-1]) from None


def _ignore_ctrl_c(worker: int) -> None:
    """Ctrl-C reaches the workers too: only the main process handles it (it saves and stops the run)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _SeededImages(torch.utils.data.Dataset):
    """Item (i, seed): image i of `dataset` through `transform`, whose random draws are seeded by `seed`."""

    def __init__(self, dataset, transform):
        self.dataset, self.transform = dataset, transform

    def __getitem__(self, key):
        i, seed = key
        try:
            image, label = self.dataset[i]
        except (OSError, ValueError, SyntaxError) as exc:  # PIL: truncated, not an image, a damaged header
            where = self.dataset.samples[i][0] if hasattr(self.dataset, "samples") else f"image {i}"
            raise DataError(f"{where} cannot be read as an image ({exc}): remove or replace it.") from None
        with torch.random.fork_rng(devices=[]):  # the random transforms draw from the global RNG: seed it per image
            torch.manual_seed(seed)
            return self.transform(image), label
