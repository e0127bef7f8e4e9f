"""Batches for training and evaluation, with the augmentation presets.

`TensorLoader` serves an in-memory `TensorSplit` (the fast path: one index per batch, on the GPU when there is one);
`FolderLoader` serves a torchvision dataset of image files through a multi-worker DataLoader. Both give the same
batches for the same (seed, epoch, step), shard a global batch across DDP ranks, and can start mid-epoch (resume).
"""

from __future__ import annotations

import math

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
from .splits import TensorSplit


class ShardedBatches:
    """What both loaders share: `size` examples in batches of a global `batch_size` (each of `world_size` processes
    takes its `rank`-th share), in a seeded order per epoch (shuffled or not), with or without the last partial
    batch."""

    def __init__(
        self, size: int, batch_size: int, shuffle: bool, seed: int, drop_last: bool, device, rank: int, world_size: int
    ):
        if batch_size % world_size:
            raise ValueError(f"batch size {batch_size} must be divisible by the number of processes ({world_size}).")
        self.size, self.batch_size, self.shuffle, self.seed, self.drop_last = size, batch_size, shuffle, seed, drop_last
        self.device, self.rank, self.world_size = torch.device(device), rank, world_size

    def __len__(self) -> int:
        return self.size // self.batch_size if self.drop_last else math.ceil(self.size / self.batch_size)

    def order(self, epoch: int) -> torch.Tensor:
        """The example order of `epoch` (a permutation drawn from (seed, epoch), or 0..size-1), on the CPU."""
        if not self.shuffle:
            return torch.arange(self.size)
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.seed * 7919 + epoch))


class TensorLoader(ShardedBatches):
    """Batches of a TensorSplit: uint8 -> augmented -> float, normalised with (mean, std), on `device`.

    The whole split is held on `device` as uint8 (Fashion-MNIST's 60,000 images are 47 MB), so a batch is an index
    and the augmentation runs there too. On the CPU every image gets its own RandAugment draw; on a GPU, where one
    small kernel per image and op would leave it idle, the batch is cut into `randaugment_groups` groups (default
    RANDAUGMENT_GROUPS) that share a draw, and the crop-flip offsets are drawn by a CUDA generator (no host-to-device
    copy, no sync)."""

    def __init__(
        self,
        split: TensorSplit,
        batch_size: int,
        mean,
        std,
        shuffle: bool = False,
        augment: str = "none",
        seed: int = 0,
        drop_last: bool = False,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        randaugment_groups: int | None = None,
    ):
        super().__init__(len(split), batch_size, shuffle, seed, drop_last, device, rank, world_size)
        if randaugment_groups is not None and randaugment_groups < 1:
            raise ValueError(
                f"randaugment_groups must be at least 1 (or None: per image on the CPU, "
                f"{RANDAUGMENT_GROUPS} groups on a GPU), got {randaugment_groups}."
            )
        if randaugment_groups is None and self.device.type == "cuda":
            randaugment_groups = RANDAUGMENT_GROUPS
        self.randaugment_groups, self.augment = randaugment_groups, check_augment(augment)
        self.split = split.to(device)
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

    def __init__(
        self,
        dataset,
        image_size: int,
        batch_size: int,
        mean,
        std,
        shuffle: bool = False,
        augment: str = "none",
        seed: int = 0,
        drop_last: bool = False,
        device="cpu",
        rank: int = 0,
        world_size: int = 1,
        num_workers: int = 4,
    ):
        super().__init__(len(dataset), batch_size, shuffle, seed, drop_last, device, rank, world_size)
        self.dataset, self.num_workers = dataset, num_workers
        self.transform = folder_transforms(image_size, mean, std, shuffle, check_augment(augment))

    def _item(self, key):
        i, seed = key
        image, label = self.dataset[i]
        with torch.random.fork_rng(devices=[]):  # the random transforms draw from the global RNG: seed it per image
            torch.manual_seed(seed)
            return self.transform(image), label

    def _shard(self, order: torch.Tensor, epoch: int, step: int) -> list[tuple[int, int]]:
        """(index, augmentation seed) of this process's images of a step: the seeds are drawn for the global batch, so
        augmentation depends on (seed, epoch, step, position) only, not on workers, sharding or where a run resumed."""
        idx = order[step * self.batch_size : (step + 1) * self.batch_size]
        seeds = torch.randint(
            0, 2**62, (len(idx),), generator=torch.Generator().manual_seed(batch_seed(self.seed, epoch, step))
        )
        return list(
            zip(
                idx.tensor_split(self.world_size)[self.rank].tolist(),
                seeds.tensor_split(self.world_size)[self.rank].tolist(),
            )
        )

    def epoch(self, epoch: int = 0, start: int = 0):
        """Iterate over the batches of `epoch`, from step `start` on (read and transformed by the workers)."""
        order = self.order(epoch)
        mine = [self._shard(order, epoch, s) for s in range(start, len(self))]
        loader = torch.utils.data.DataLoader(
            _MapDataset(self._item),
            batch_sampler=_Batches(mine),
            num_workers=self.num_workers,
            pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(batch_seed(self.seed, epoch, start)),
        )
        for images, labels in loader:
            yield images.to(self.device, non_blocking=True), labels.to(self.device, non_blocking=True)


class _MapDataset(torch.utils.data.Dataset):
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, i):
        return self.fn(i)


class _Batches(torch.utils.data.Sampler):
    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self):
        return len(self.batches)
