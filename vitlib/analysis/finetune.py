"""Fine-tuning a pre-trained ViT, possibly at a higher resolution (section 3.2).

    ft = prepare_for_finetuning(pretrained, num_classes=10, image_size=28)  # the paper's recipe

The paper removes the pre-trained head, attaches a zero-initialised D x K layer and, at a higher resolution, keeps P
(so N = HW / P^2 grows) and "perform[s] 2D interpolation of the pre-trained position embeddings". `pos_interp` picks
how E_pos's new rows are made: "2d" the paper's (`vitlib.model.resample_pos_embed`, the grid resampled as an image of
D channels); "1d" a baseline that stretches the sequence and blends row ends with row starts; "fresh" a baseline
drawn again at random (std 0.02). The [class] token's own position embedding is kept in every case.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from ..model import VisionTransformer, check_patch_size
from ..utils import pair

POS_INTERPOLATIONS = ("2d", "1d", "fresh")


def resample_pos_embed_1d(pos_embed: torch.Tensor, new_num_patches: int, num_prefix_tokens: int = 1) -> torch.Tensor:
    """The "1d" baseline: stretch the sequence of (1, prefix + N, D) position embeddings to N' patches by 1D linear
    interpolation, ignoring that the patches form a 2D grid."""
    if new_num_patches < 1:
        raise ValueError(f"new_num_patches must be at least 1, got {new_num_patches}.")
    prefix, seq = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    if seq.shape[1] == new_num_patches:
        return pos_embed
    seq = F.interpolate(seq.transpose(1, 2).float(), size=new_num_patches, mode="linear", align_corners=False)
    return torch.cat([prefix, seq.transpose(1, 2).to(pos_embed.dtype)], dim=1)


def fresh_pos_embed(
    pos_embed: torch.Tensor, new_num_patches: int, num_prefix_tokens=1, generator=None, std=0.02
) -> torch.Tensor:
    """The "fresh" baseline: keep the prefix ([class]) rows, draw N' new patch rows from N(0, std^2)."""
    prefix = pos_embed[:, :num_prefix_tokens]
    new = torch.randn(1, new_num_patches, pos_embed.shape[-1], generator=generator) * std
    return torch.cat([prefix, new.to(pos_embed.device, pos_embed.dtype)], dim=1)


def replace_head(model: VisionTransformer, num_classes: int) -> VisionTransformer:
    """Section 3.2: drop the pre-training head (MLP or linear) for a zero-initialised D x K linear layer, in place."""
    if not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be a positive int (K: the task's classes), got {num_classes!r}.")
    device = next(model.parameters()).device
    model.pre_logits, model.head = nn.Identity(), nn.Linear(model.config.dim, num_classes).to(device)
    nn.init.zeros_(model.head.weight)
    nn.init.zeros_(model.head.bias)
    model.config = model.config.replace(num_classes=num_classes, head_hidden=None)
    return model


@torch.no_grad()
def prepare_for_finetuning(
    model: VisionTransformer,
    num_classes: int,
    image_size: int | tuple[int, int] | None = None,
    pos_interp: str = "2d",
    mode: str = "bicubic",
    seed: int = 0,
) -> VisionTransformer:
    """A copy of the pre-trained `model` ready to fine-tune (section 3.2): a zero-initialised D x K head and, with
    `image_size`, the same patch size P at the new resolution, E_pos made by `pos_interp` ("2d" the paper's, "1d" and
    "fresh" baselines; see the module docstring). `mode`: the 2D interpolation (bicubic, as timm). `seed` draws the
    "fresh" embeddings."""
    if not isinstance(model, VisionTransformer):
        raise TypeError(f"expected a vitlib VisionTransformer, got {type(model).__name__}.")
    if pos_interp not in POS_INTERPOLATIONS:
        raise ValueError(
            f"unknown pos_interp {pos_interp!r}: choose one of {', '.join(POS_INTERPOLATIONS)} "
            f"('2d' is the paper's 2D interpolation, the others are baselines)."
        )
    if mode not in ("bicubic", "bilinear", "nearest"):
        raise ValueError(f"unknown interpolation mode {mode!r}: choose bicubic, bilinear or nearest.")
    kind = model.config.pos_embed
    if image_size is not None:
        size = pair(image_size, "image_size")
        if min(size) < 1:
            raise ValueError(f"image_size must be a positive int or (height, width), got {image_size!r}.")
        try:
            new_grid = check_patch_size(size, model.patch_embed.patch_size)
        except ValueError as err:
            raise ValueError(
                f"cannot fine-tune at {size[0]}x{size[1]}: the patch size P={model.patch_embed.patch_size} "
                f"stays the same (section 3.2), so the image sides must be multiples of it ({err})."
            ) from None
    if pos_interp != "2d" and kind != "learned":
        raise ValueError(
            f"pos_interp={pos_interp!r} is a baseline for learned 1D position embeddings; this model has "
            f"pos_embed={kind!r}: use pos_interp='2d'."
        )
    model = copy.deepcopy(model)
    replace_head(model, num_classes)
    if image_size is None or tuple(size) == tuple(model.image_size):
        return model
    old, prefix = model.position_embedding(), model.num_prefix_tokens
    model.set_image_size(size, mode=mode)  # patch grid, N, E_pos in 2D (`mode`), relative-position tables
    if pos_interp != "2d":  # a baseline replaces the 2D-interpolated E_pos (learned 1D only, checked above)
        n = new_grid[0] * new_grid[1]
        if pos_interp == "1d":
            new = resample_pos_embed_1d(old, n, prefix)
        else:
            new = fresh_pos_embed(old, n, prefix, torch.Generator().manual_seed(seed))
        model.pos_embed = nn.Parameter(new.contiguous())
    return model
