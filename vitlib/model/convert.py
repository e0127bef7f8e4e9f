"""Weights from the reference implementations: torchvision's `VisionTransformer`, timm's and the original JAX `.npz`.

Each converter reads the other model's sizes into a `ViTConfig` (any width, depth, heads, patch size and image size,
rectangular included; [class] token or global average pooling; with or without the pre-training MLP head), maps the
other layout onto vitlib's names, which are timm's (so timm's state dict is copied as it is), and loads strictly: a
missing or left-over tensor is an error, never a silent mismatch. What vitlib cannot express (register tokens,
LayerScale, a pre-norm, qk-norm, ...) is refused by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..utils import square_grid
from .config import ViTConfig, heads_for_width
from .vit import VisionTransformer


def _load(config: ViTConfig, sd: dict, source: str) -> VisionTransformer:
    model = VisionTransformer(config)
    result = model.load_state_dict(sd, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"{source}: the weights do not fit a vitlib ViT of {config} (missing {result.missing_keys}, "
            f"unexpected {result.unexpected_keys})."
        )
    return model


def _image_size(grid: tuple[int, int], patch_size: int) -> int | tuple[int, int]:
    h, w = grid[0] * patch_size, grid[1] * patch_size
    return h if h == w else (h, w)


def _heads(dim: int, num_heads: int | None, source: str) -> int:
    num_heads = num_heads or heads_for_width(dim)
    if num_heads is None:
        raise ValueError(
            f"{source}: the number of heads cannot be read from the weights of width {dim} (not a "
            f"width of Table 1); pass num_heads=."
        )
    return num_heads


def _head_weights(sd: dict, weight, bias, pre_weight=None, pre_bias=None) -> int | None:
    """Put the classifier (and the pre-training MLP head, if any) into `sd`; returns its hidden width or None."""
    if weight is not None:
        sd["head.weight"], sd["head.bias"] = weight, bias
    if pre_weight is None:
        return None
    sd["pre_logits.0.weight"], sd["pre_logits.0.bias"] = pre_weight, pre_bias
    return pre_weight.shape[0]


# ------------------------------------------------------------------------------------------------- torchvision
_TORCHVISION_BLOCK = {
    "ln_1": "norm1",
    "self_attention.in_proj_weight": "attn.qkv.weight",
    "self_attention.in_proj_bias": "attn.qkv.bias",
    "self_attention.out_proj": "attn.proj",
    "ln_2": "norm2",
    "mlp.0": "mlp.fc1",
    "mlp.3": "mlp.fc2",
    "mlp.linear_1": "mlp.fc1",
    "mlp.linear_2": "mlp.fc2",
}


def from_torchvision(
    model_or_state_dict, num_heads: int | None = None, image_size: int | tuple[int, int] | None = None
) -> VisionTransformer:
    """A torchvision `VisionTransformer` (`vit_b_16`, ... or one built with other sizes), or its state dict, as a
    vitlib model with the same weights. From a state dict the image is taken to be square unless `image_size` is
    given, and the heads come from Table 1's width unless `num_heads` is given."""
    if isinstance(model_or_state_dict, nn.Module):
        num_heads = num_heads or model_or_state_dict.encoder.layers[0].self_attention.num_heads
        image_size = image_size or model_or_state_dict.image_size
        src = model_or_state_dict.state_dict()
    else:
        src = dict(model_or_state_dict)
    if "conv_proj.weight" not in src:
        raise ValueError(
            "not a torchvision VisionTransformer state dict (no 'conv_proj.weight'); "
            "conv-stem variants (conv_proj.conv_*) are not supported."
        )
    conv = src["conv_proj.weight"]
    dim, in_channels, patch_size = conv.shape[0], conv.shape[1], conv.shape[2]
    n = src["encoder.pos_embedding"].shape[1] - 1
    sd = {
        "patch_embed.proj.weight": conv,
        "patch_embed.proj.bias": src["conv_proj.bias"],
        "cls_token": src["class_token"],
        "pos_embed": src["encoder.pos_embedding"],
        "norm.weight": src["encoder.ln.weight"],
        "norm.bias": src["encoder.ln.bias"],
    }
    hidden = _head_weights(
        sd,
        src["heads.head.weight"],
        src["heads.head.bias"],
        src.get("heads.pre_logits.weight"),
        src.get("heads.pre_logits.bias"),
    )
    depth = len({k.split(".")[2] for k in src if k.startswith("encoder.layers.")})
    for i in range(depth):
        prefix = f"encoder.layers.encoder_layer_{i}."
        for k, v in src.items():
            if k.startswith(prefix):
                rest = k[len(prefix) :]
                old = next((o for o in _TORCHVISION_BLOCK if rest.startswith(o)), None)
                if old is None:
                    raise ValueError(f"from_torchvision: {k} is not a tensor of a plain ViT encoder block.")
                sd[f"blocks.{i}.{_TORCHVISION_BLOCK[old]}{rest[len(old) :]}"] = v
    size = image_size or _image_size(square_grid(n), patch_size)
    config = ViTConfig(
        image_size=size,
        patch_size=patch_size,
        in_channels=in_channels,
        num_classes=src["heads.head.weight"].shape[0],
        dim=dim,
        depth=depth,
        heads=_heads(dim, num_heads, "from_torchvision"),
        mlp_dim=sd["blocks.0.mlp.fc1.weight"].shape[0],
        head_hidden=hidden,
    )
    return _load(config, sd, "from_torchvision")


# -------------------------------------------------------------------------------------------------------- timm
def _check_timm(model: nn.Module) -> None:
    """Refuse, by name, what a vitlib ViT cannot express."""
    block = model.blocks[0]
    unsupported = {
        "register tokens (reg_tokens)": getattr(model, "num_reg_tokens", 0),
        "a pre-norm (pre_norm, CLIP style)": not isinstance(getattr(model, "norm_pre", nn.Identity()), nn.Identity),
        "position embeddings without the [class] row (no_embed_class)": getattr(model, "no_embed_class", False),
        "LayerScale (init_values)": not isinstance(getattr(block, "ls1", nn.Identity()), nn.Identity),
        "qk-norm (qk_norm)": not isinstance(getattr(block.attn, "q_norm", nn.Identity()), nn.Identity),
        "an attention projection without bias (proj_bias=False)": block.attn.proj.bias is None,
        "a LayerNorm after pooling (fc_norm; build the timm model with fc_norm=False)": not isinstance(
            getattr(model, "fc_norm", nn.Identity()), nn.Identity
        ),
        f"global_pool={getattr(model, 'global_pool', None)!r} (vitlib pools by 'token' or 'avg')": getattr(
            model, "global_pool", "token"
        )
        not in ("token", "avg"),
    }
    found = [what for what, present in unsupported.items() if present]
    if found:
        raise ValueError(f"from_timm: this timm ViT has {', '.join(found)}, which vitlib's ViT does not have.")


def from_timm(model: nn.Module) -> VisionTransformer:
    """A timm `VisionTransformer` (`vit_*_patch*`, or one built with other sizes, image sizes, GAP or no head) as a
    vitlib model with the same weights."""
    _check_timm(model)
    src = model.state_dict()
    conv = src["patch_embed.proj.weight"]
    dim, in_channels, patch_size = conv.shape[0], conv.shape[1], conv.shape[2]
    config = ViTConfig(
        image_size=_image_size(tuple(model.patch_embed.grid_size), patch_size),
        patch_size=patch_size,
        in_channels=in_channels,
        num_classes=model.num_classes,
        dim=dim,
        depth=len(model.blocks),
        heads=model.blocks[0].attn.num_heads,
        mlp_dim=src["blocks.0.mlp.fc1.weight"].shape[0],
        pool="cls" if model.global_pool == "token" else "gap",
        class_token="cls_token" in src,
        qkv_bias="blocks.0.attn.qkv.bias" in src,
    )
    return _load(config, src, "from_timm")  # timm's names are vitlib's: its state dict as it is


# ------------------------------------------------------------------------------------------------ original JAX
def from_jax_npz(path: str | Path, image_size: int | tuple[int, int] | None = None) -> VisionTransformer:
    """The original checkpoints (google-research/vision_transformer `.npz`, the layout timm's `_load_weights`
    reads), [class] token or GAP ('gap' classifier); the image is taken to be square unless `image_size` is given."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"no checkpoint at {path}: download an original ViT .npz (e.g. ViT-B_16.npz) there first."
        )
    w = {k: torch.from_numpy(np.asarray(v)).float() for k, v in np.load(path).items()}
    if "embedding/kernel" not in w:
        raise ValueError(
            f"{path} is not an original ViT checkpoint: it has no 'embedding/kernel' (keys start with {sorted(w)[:3]})."
        )
    kernel = w["embedding/kernel"]  # (P, P, C, D), HWIO
    patch_size, in_channels, dim = kernel.shape[0], kernel.shape[2], kernel.shape[3]
    pos = w["Transformer/posembed_input/pos_embedding"]
    class_token = "cls" in w
    sd = {
        "patch_embed.proj.weight": kernel.permute(3, 2, 0, 1),  # HWIO -> (D, C, P, P)
        "patch_embed.proj.bias": w["embedding/bias"],
        "pos_embed": pos,
        "norm.weight": w["Transformer/encoder_norm/scale"],
        "norm.bias": w["Transformer/encoder_norm/bias"],
    }
    if class_token:
        sd["cls_token"] = w["cls"]
    pre = w.get("pre_logits/kernel")
    hidden = _head_weights(
        sd, w["head/kernel"].T, w["head/bias"], None if pre is None else pre.T, w.get("pre_logits/bias")
    )
    depth = len({k.split("/")[1] for k in w if k.startswith("Transformer/encoderblock_")})
    heads = w["Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel"].shape[1]
    for i in range(depth):
        sd.update(_jax_block(w, f"Transformer/encoderblock_{i}/", f"blocks.{i}."))
    n = pos.shape[1] - (1 if class_token else 0)
    config = ViTConfig(
        image_size=image_size or _image_size(square_grid(n), patch_size),
        patch_size=patch_size,
        in_channels=in_channels,
        num_classes=sd["head.weight"].shape[0],
        dim=dim,
        depth=depth,
        heads=heads,
        mlp_dim=sd["blocks.0.mlp.fc1.weight"].shape[0],
        head_hidden=hidden,
        pool="cls" if class_token else "gap",
        class_token=class_token,
    )
    return _load(config, sd, f"from_jax_npz({path.name})")


def _jax_block(w: dict, b: str, s: str) -> dict:
    """One encoder block of the original layout ('Transformer/encoderblock_i/') under vitlib's names ('blocks.i.')."""
    mha = b + "MultiHeadDotProductAttention_1/"
    sd = {
        s + "attn.qkv.weight": torch.cat([w[f"{mha}{n}/kernel"].flatten(1).T for n in ("query", "key", "value")]),
        s + "attn.qkv.bias": torch.cat([w[f"{mha}{n}/bias"].flatten() for n in ("query", "key", "value")]),
        s + "attn.proj.weight": w[mha + "out/kernel"].flatten(0, 1).T,
        s + "attn.proj.bias": w[mha + "out/bias"],
    }
    for ln, name in (("LayerNorm_0", "norm1"), ("LayerNorm_2", "norm2")):
        sd[s + name + ".weight"], sd[s + name + ".bias"] = w[f"{b}{ln}/scale"], w[f"{b}{ln}/bias"]
    for r in range(2):
        sd[f"{s}mlp.fc{r + 1}.weight"] = w[f"{b}MlpBlock_3/Dense_{r}/kernel"].T
        sd[f"{s}mlp.fc{r + 1}.bias"] = w[f"{b}MlpBlock_3/Dense_{r}/bias"]
    return sd
