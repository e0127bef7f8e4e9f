"""Augmentation: the presets ('none', 'crop-flip', 'rrc-flip', 'randaugment'), vectorised crop-flips that run where
the batch is, transforms v2 for image files, and mixup / cutmix; every draw seeded by (run seed, epoch, step), so a
resumed run augments exactly as an uninterrupted one."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchvision.transforms.v2 as T

AUGMENTATIONS = ("none", "crop-flip", "rrc-flip", "randaugment")
RRC_SCALE, RRC_RATIO = (0.25, 1.0), (3 / 4, 4 / 3)  # in-memory random-resized crops: share of the area, aspect ratio
RANDAUGMENT_GROUPS = 16  # on a GPU, RandAugment draws one op per group of images, not per image (see TensorLoader)


def check_augment(augment: str) -> str:
    if augment not in AUGMENTATIONS:
        raise ValueError(
            f"unknown augmentation {augment!r}: choose one of {', '.join(AUGMENTATIONS)} "
            f"(mixup/cutmix are separate options, label smoothing belongs to the loss)."
        )
    return augment


def batch_seed(seed: int, epoch: int, step: int) -> int:
    """One seed per (run seed, epoch, step): augmentation is reproducible and independent of where a run resumed."""
    return (seed * 1_000_003 + epoch) * 1_000_033 + step


def random_crop_flip(
    images: torch.Tensor, generator: torch.Generator, pad: int, offset: int = 0, total: int | None = None
) -> torch.Tensor:
    """Per-image random translation by up to `pad` pixels (zero padding) and horizontal flip, vectorised. The draws
    are made for `total` images (default: this batch), on the generator's device, and rows offset.. are used: one
    shard of a global batch is augmented exactly as in the whole batch."""
    b, _, h, w = images.shape
    total, mine, where = total or b, slice(offset, offset + b), generator.device
    padded = F.pad(images, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (total, 1), generator=generator, device=where)[mine].to(images.device)
    dx = torch.randint(0, 2 * pad + 1, (total, 1), generator=generator, device=where)[mine].to(images.device)
    flip = (torch.rand(total, 1, generator=generator, device=where) < 0.5)[mine].to(images.device)
    rows = torch.arange(h, device=images.device)[None] + dy  # (B, H)
    cols = torch.arange(w, device=images.device)[None].expand(b, w)
    cols = torch.where(flip, w - 1 - cols, cols) + dx  # (B, W)
    idx = torch.arange(b, device=images.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[idx, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def random_resized_crop_flip(
    images: torch.Tensor,
    generator: torch.Generator,
    scale: tuple[float, float] = RRC_SCALE,
    ratio: tuple[float, float] = RRC_RATIO,
    offset: int = 0,
    total: int | None = None,
) -> torch.Tensor:
    """Per-image random-resized crop (a box of `scale` of the area at an aspect ratio in `ratio`, resized back
    bilinearly) and horizontal flip, vectorised (Inception's augmentation; Touvron et al. 2019). Draws for `total`
    images, rows offset.. used, as `random_crop_flip`."""
    b, where = images.shape[0], generator.device
    total, mine = total or b, slice(offset, offset + b)
    u = torch.rand(total, 5, generator=generator, device=where)[mine].to(images.device)
    area = scale[0] + (scale[1] - scale[0]) * u[:, 0]
    log_r = torch.log(torch.tensor(ratio[0])) + (torch.log(torch.tensor(ratio[1] / ratio[0]))) * u[:, 1]
    w, h = (area * log_r.exp()).sqrt().clamp(max=1.0), (area / log_r.exp()).sqrt().clamp(max=1.0)  # of the side
    cx, cy = (2 * u[:, 2] - 1) * (1 - w), (2 * u[:, 3] - 1) * (1 - h)  # box centre in [-1, 1], the box inside
    flip = torch.where(u[:, 4] < 0.5, -1.0, 1.0)
    theta = torch.zeros(b, 2, 3, device=images.device)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = w * flip, cx, h, cy
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    return F.grid_sample(images.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)


def folder_transforms(image_size: int, mean, std, train: bool, augment: str) -> T.Compose:
    """Transforms v2 for image files: RandomResizedCrop + flip (+ RandAugment) to train, else resize + centre crop."""
    if train and augment != "none":
        ops = [T.RandomResizedCrop(image_size, antialias=True), T.RandomHorizontalFlip()]
        ops += [T.RandAugment()] if augment == "randaugment" else []
    else:
        ops = [T.Resize(int(image_size * 1.14), antialias=True), T.CenterCrop(image_size)]
    return T.Compose([T.ToImage(), *ops, T.ToDtype(torch.float32, scale=True), T.Normalize(mean, std)])


def make_mixer(mixup: float, cutmix: float, num_classes: int):
    """MixUp and/or CutMix (transforms v2) of a batch and its labels, one of the two per batch; None when both are 0."""
    ops = [mix(alpha=a, num_classes=num_classes) for mix, a in ((T.MixUp, mixup), (T.CutMix, cutmix)) if a > 0]
    return T.RandomChoice(ops) if len(ops) > 1 else (ops[0] if ops else None)
