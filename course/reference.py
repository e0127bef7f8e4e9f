"""A pre-trained ViT from a local file and a folder of one's own images, to look inside a well-trained model
(section 4.5) when its weights are on disk (they cannot be downloaded at run time)."""

from __future__ import annotations

from pathlib import Path

import torch
import torchvision.transforms.v2.functional as TF
from PIL import Image

from vitlib.data import IMAGENET_MEAN, IMAGENET_STD
from vitlib.model import from_jax_npz, from_timm, from_torchvision, heads_for_width
from vitlib.utils import square_grid

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".gif", ".tif", ".tiff")


def load_reference_vit(path) -> tuple[torch.nn.Module, tuple[float, ...], tuple[float, ...]]:
    """A pre-trained ViT from a local file, as a vitlib model, with the (mean, std) its inputs were normalised by:
    an original JAX / timm `.npz` (google-research/vision_transformer; inputs scaled to [-1, 1]), a torchvision state
    dict `.pth` (e.g. vit_b_16's IMAGENET1K_V1 file; ImageNet mean and std) or a timm state dict `.pth` ([-1, 1])."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"no weight file at {path}: pass the path of a ViT .npz (e.g. ViT-B_16.npz) or a "
            f"torchvision / timm state dict .pth, downloaded beforehand."
        )
    half = (0.5, 0.5, 0.5)
    if path.suffix == ".npz":
        return from_jax_npz(path).eval(), half, half
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle errors, a truncated file, ...
        raise ValueError(
            f"{path} could not be read as a PyTorch state dict ({err}); an original ViT checkpoint must end in .npz."
        ) from err
    for key in ("model", "state_dict"):  # training checkpoints often wrap the weights
        if isinstance(sd, dict) and isinstance(sd.get(key), dict):
            sd = sd[key]
    if not isinstance(sd, dict):
        raise ValueError(f"{path} holds a {type(sd).__name__}, not a state dict: save model.state_dict().")
    if "conv_proj.weight" in sd:
        return from_torchvision(sd).eval(), IMAGENET_MEAN, IMAGENET_STD
    if "patch_embed.proj.weight" in sd and "cls_token" in sd:
        from timm.models.vision_transformer import VisionTransformer as TimmViT

        conv, pos = sd["patch_embed.proj.weight"], sd["pos_embed"]
        dim, patch = conv.shape[0], conv.shape[-1]
        side = square_grid(pos.shape[1] - 1)[0]
        depth = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
        heads = heads_for_width(dim)
        if heads is None:
            raise ValueError(
                f"{path}: a timm ViT of width {dim} is not a size of Table 1, so its number of heads "
                f"cannot be read from the weights; convert it with vitlib.from_timm(model) instead."
            )
        timm_model = TimmViT(
            img_size=side * patch,
            patch_size=patch,
            in_chans=conv.shape[1],
            embed_dim=dim,
            depth=depth,
            num_heads=heads,
            mlp_ratio=sd["blocks.0.mlp.fc1.weight"].shape[0] / dim,
            num_classes=sd["head.weight"].shape[0] if "head.weight" in sd else 0,
        )
        timm_model.load_state_dict(sd)
        return from_timm(timm_model).eval(), half, half
    raise ValueError(
        f"{path} is neither a torchvision ViT state dict (conv_proj.weight) nor a timm one "
        f"(patch_embed.proj.weight); its first keys are {sorted(sd)[:4]}."
    )


def load_image_folder(
    folder, image_size: int, mean, std, limit: int = 16
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Up to `limit` images of a folder (searched recursively, sorted by path), RGB, the shorter side resized to
    `image_size` and centre-cropped to a square. Returns (images in [0, 1] for display, the same normalised with
    (mean, std) for the model, the file names), images (B, 3, S, S)."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no folder {folder}: image_folder must name a folder of image files ({', '.join(IMAGE_SUFFIXES)})."
        )
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)[:limit]
    if not files:
        raise ValueError(f"{folder} holds no image files ({', '.join(IMAGE_SUFFIXES)}).")
    shown = []
    for f in files:
        with Image.open(f) as im:
            x = TF.pil_to_tensor(im.convert("RGB")).float() / 255
        x = TF.resize(x, [image_size], antialias=True)
        shown.append(TF.center_crop(x, [image_size, image_size]))
    shown = torch.stack(shown)
    m, s = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
    return shown, (shown - m) / s, [f.name for f in files]
