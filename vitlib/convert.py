"""Weights from the reference implementations: torchvision's `vit_*`, timm's `vit_*_patch*` and the original JAX `.npz`.

Each converter maps the other layout onto vitlib's names, builds the matching `VisionTransformer` and loads strictly,
so a missing or left-over tensor is an error, never a silent mismatch.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .model import VisionTransformer

_HEADS_BY_WIDTH = {192: 3, 384: 6, 768: 12, 1024: 16, 1280: 16}  # Table 1 (+ Ti)


def _linear_from_conv(w: torch.Tensor) -> torch.Tensor:
    """Conv2d filters (D, C, P, P) -> E as a linear weight (D, P*P*C) in vitlib's (p1 p2 c) patch order."""
    return w.permute(0, 2, 3, 1).reshape(w.shape[0], -1)


def _build(sd: dict, *, patch_size: int, in_channels: int, dim: int, depth: int, heads: int, mlp_dim: int,
           num_patches: int, num_classes: int, head_hidden: int | None, source: str) -> VisionTransformer:
    side = math.isqrt(num_patches)
    if side * side != num_patches:
        raise ValueError(f"{source}: {num_patches} patch positions are not a square grid; only square images are supported.")
    model = VisionTransformer(image_size=side * patch_size, patch_size=patch_size, in_channels=in_channels,
                              num_classes=num_classes, dim=dim, depth=depth, heads=heads, mlp_dim=mlp_dim,
                              head_hidden=head_hidden)
    result = model.load_state_dict(sd, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(f"{source}: the weights do not fit a standard ViT (missing {result.missing_keys}, "
                         f"unexpected {result.unexpected_keys}).")
    return model


def _heads_for(dim: int, num_heads: int | None, source: str) -> int:
    if num_heads is None:
        if dim not in _HEADS_BY_WIDTH:
            raise ValueError(f"{source}: the number of heads cannot be read from the weights for width {dim}; pass num_heads=.")
        num_heads = _HEADS_BY_WIDTH[dim]
    return num_heads


def from_torchvision(model_or_state_dict, num_heads: int | None = None) -> VisionTransformer:
    """A torchvision `vit_b_16`-family model (or its state dict) as a vitlib model with the same weights."""
    if isinstance(model_or_state_dict, nn.Module):
        num_heads = num_heads or model_or_state_dict.encoder.layers[0].self_attention.num_heads
        src = model_or_state_dict.state_dict()
    else:
        src = dict(model_or_state_dict)
    if "conv_proj.weight" not in src:
        raise ValueError("not a torchvision VisionTransformer state dict (no 'conv_proj.weight'); "
                         "conv-stem variants (conv_proj.conv_*) are not supported.")
    conv = src["conv_proj.weight"]
    dim, in_channels, patch_size = conv.shape[0], conv.shape[1], conv.shape[2]
    depth = len({k.split(".")[2] for k in src if k.startswith("encoder.layers.")})
    sd = {"patch_embed.proj.weight": _linear_from_conv(conv), "patch_embed.proj.bias": src["conv_proj.bias"],
          "cls_token.token": src["class_token"], "pos_embed.weight": src["encoder.pos_embedding"],
          "norm.weight": src["encoder.ln.weight"], "norm.bias": src["encoder.ln.bias"],
          "head.fc.weight": src["heads.head.weight"], "head.fc.bias": src["heads.head.bias"]}
    head_hidden = None
    if "heads.pre_logits.weight" in src:
        head_hidden = src["heads.pre_logits.weight"].shape[0]
        sd["head.pre_logits.0.weight"], sd["head.pre_logits.0.bias"] = src["heads.pre_logits.weight"], src["heads.pre_logits.bias"]
    names = {"ln_1": "norm1", "self_attention.in_proj_weight": "attn.qkv.weight",
             "self_attention.in_proj_bias": "attn.qkv.bias", "self_attention.out_proj": "attn.proj", "ln_2": "norm2",
             "mlp.0": "mlp.fc1", "mlp.3": "mlp.fc2", "mlp.linear_1": "mlp.fc1", "mlp.linear_2": "mlp.fc2"}
    for i in range(depth):
        prefix = f"encoder.layers.encoder_layer_{i}."
        for k, v in src.items():
            if k.startswith(prefix):
                rest = k[len(prefix):]
                for old, new in names.items():
                    if rest.startswith(old):
                        sd[f"blocks.{i}.{new}{rest[len(old):]}"] = v
                        break
    return _build(sd, patch_size=patch_size, in_channels=in_channels, dim=dim, depth=depth,
                  heads=_heads_for(dim, num_heads, "from_torchvision"), mlp_dim=sd["blocks.0.mlp.fc1.weight"].shape[0],
                  num_patches=src["encoder.pos_embedding"].shape[1] - 1, num_classes=src["heads.head.weight"].shape[0],
                  head_hidden=head_hidden, source="from_torchvision")


def from_timm(model: nn.Module) -> VisionTransformer:
    """A timm `vit_*_patch*` VisionTransformer ([class] token pooling, plain pre-LN blocks) as a vitlib model."""
    if getattr(model, "global_pool", "token") != "token" or getattr(model, "cls_token", None) is None:
        raise ValueError("from_timm supports timm ViTs pooled by the [class] token (global_pool='token').")
    if not isinstance(getattr(model, "norm_pre", nn.Identity()), nn.Identity) or getattr(model, "num_reg_tokens", 0):
        raise ValueError("from_timm supports plain ViTs: no pre-norm (CLIP style) and no register tokens.")
    src = model.state_dict()
    conv = src["patch_embed.proj.weight"]
    sd = {"patch_embed.proj.weight": _linear_from_conv(conv), "patch_embed.proj.bias": src["patch_embed.proj.bias"],
          "cls_token.token": src["cls_token"], "pos_embed.weight": src["pos_embed"],
          "norm.weight": src["norm.weight"], "norm.bias": src["norm.bias"],
          "head.fc.weight": src["head.weight"], "head.fc.bias": src["head.bias"]}
    sd.update({k: v for k, v in src.items() if k.startswith("blocks.")})
    return _build(sd, patch_size=conv.shape[2], in_channels=conv.shape[1], dim=conv.shape[0], depth=len(model.blocks),
                  heads=model.blocks[0].attn.num_heads, mlp_dim=src["blocks.0.mlp.fc1.weight"].shape[0],
                  num_patches=src["pos_embed"].shape[1] - 1, num_classes=src["head.weight"].shape[0], head_hidden=None,
                  source="from_timm")


def from_jax_npz(path: str | Path) -> VisionTransformer:
    """The original checkpoints (google-research/vision_transformer `.npz`, the layout timm's `_load_weights` reads)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}: download an original ViT .npz (e.g. ViT-B_16.npz) there first.")
    w = {k: torch.from_numpy(np.asarray(v)).float() for k, v in np.load(path).items()}
    if "embedding/kernel" not in w:
        raise ValueError(f"{path} is not an original ViT checkpoint: it has no 'embedding/kernel' "
                         f"(keys start with {sorted(w)[:3]}).")
    kernel = w["embedding/kernel"]                      # (P, P, C, D), HWIO
    patch_size, in_channels, dim = kernel.shape[0], kernel.shape[2], kernel.shape[3]
    sd = {"patch_embed.proj.weight": kernel.permute(3, 0, 1, 2).reshape(dim, -1),
          "patch_embed.proj.bias": w["embedding/bias"], "cls_token.token": w["cls"],
          "pos_embed.weight": w["Transformer/posembed_input/pos_embedding"],
          "norm.weight": w["Transformer/encoder_norm/scale"], "norm.bias": w["Transformer/encoder_norm/bias"],
          "head.fc.weight": w["head/kernel"].T, "head.fc.bias": w["head/bias"]}
    head_hidden = None
    if "pre_logits/kernel" in w:
        head_hidden = w["pre_logits/kernel"].shape[1]
        sd["head.pre_logits.0.weight"], sd["head.pre_logits.0.bias"] = w["pre_logits/kernel"].T, w["pre_logits/bias"]
    depth = len({k.split("/")[1] for k in w if k.startswith("Transformer/encoderblock_")})
    heads = w["Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel"].shape[1]
    for i in range(depth):
        b, s = f"Transformer/encoderblock_{i}/", f"blocks.{i}."
        mha = b + "MultiHeadDotProductAttention_1/"
        sd[s + "attn.qkv.weight"] = torch.cat([w[f"{mha}{n}/kernel"].flatten(1).T for n in ("query", "key", "value")])
        sd[s + "attn.qkv.bias"] = torch.cat([w[f"{mha}{n}/bias"].flatten() for n in ("query", "key", "value")])
        sd[s + "attn.proj.weight"] = w[mha + "out/kernel"].flatten(0, 1).T
        sd[s + "attn.proj.bias"] = w[mha + "out/bias"]
        for ln, name in (("LayerNorm_0", "norm1"), ("LayerNorm_2", "norm2")):
            sd[s + name + ".weight"], sd[s + name + ".bias"] = w[f"{b}{ln}/scale"], w[f"{b}{ln}/bias"]
        for r in range(2):
            sd[f"{s}mlp.fc{r + 1}.weight"] = w[f"{b}MlpBlock_3/Dense_{r}/kernel"].T
            sd[f"{s}mlp.fc{r + 1}.bias"] = w[f"{b}MlpBlock_3/Dense_{r}/bias"]
    return _build(sd, patch_size=patch_size, in_channels=in_channels, dim=dim, depth=depth, heads=heads,
                  mlp_dim=sd["blocks.0.mlp.fc1.weight"].shape[0], num_patches=sd["pos_embed.weight"].shape[1] - 1,
                  num_classes=sd["head.fc.weight"].shape[0], head_hidden=head_hidden, source=f"from_jax_npz({path.name})")
