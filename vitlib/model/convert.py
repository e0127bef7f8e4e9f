"""Weights from torchvision's, timm's and the original JAX ViTs, mapped onto vitlib's (timm's) names and loaded
strictly (a missing or left-over tensor is an error); what vitlib cannot express (register tokens, ...) is refused."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ..utils import square_grid
from .config import ViTConfig, heads_for_width
from .vit import VisionTransformer


def _load(sd: dict, source: str, heads: int, image_size=None, grid=None, **options) -> VisionTransformer:
    """The vitlib ViT of the sizes and weights of `sd` (vitlib's names); square unless `image_size` or `grid`."""
    kernel, pre_logits, class_token = sd["patch_embed.proj.weight"], sd.get("pre_logits.0.weight"), "cls_token" in sd
    patch_size = kernel.shape[2]
    if image_size is None:
        h, w = grid or square_grid(sd["pos_embed"].shape[1] - class_token)
        image_size = h * patch_size if h == w else (h * patch_size, w * patch_size)
    config = ViTConfig(
        image_size=image_size,
        patch_size=patch_size,
        in_channels=kernel.shape[1],
        num_classes=len(sd["head.weight"]) if "head.weight" in sd else 0,
        dim=kernel.shape[0],
        depth=len({k.split(".")[1] for k in sd if k.startswith("blocks.")}),
        heads=heads,
        mlp_dim=len(sd["blocks.0.mlp.fc1.weight"]),
        head_hidden=None if pre_logits is None else len(pre_logits),
        class_token=class_token,
        qkv_bias="blocks.0.attn.qkv.bias" in sd,
        **options,
    )
    model = VisionTransformer(config)
    result = model.load_state_dict(sd, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"{source}: the weights do not fit a vitlib ViT of {config} (missing {result.missing_keys}, "
            f"unexpected {result.unexpected_keys})."
        )
    return model


# ------------------------------------------------------------------------------------------------- torchvision
# torchvision's names -> vitlib's, by prefix: outside the blocks, and in block i ('encoder.layers.encoder_layer_i.')
_TORCHVISION = {
    "conv_proj.": "patch_embed.proj.",
    "class_token": "cls_token",
    "encoder.pos_embedding": "pos_embed",
    "encoder.ln.": "norm.",
    "heads.head.": "head.",
    "heads.pre_logits.": "pre_logits.0.",
}
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
    """A torchvision `VisionTransformer` (any size), or its state dict, as a vitlib model with the same weights; from a
    state dict the image is square unless `image_size`, the heads Table 1's for the width unless `num_heads`."""
    source = model_or_state_dict if isinstance(model_or_state_dict, nn.Module) else None
    if source is not None:
        from torchvision.models.vision_transformer import VisionTransformer as TorchvisionViT

        if not isinstance(source, TorchvisionViT):
            raise ValueError(f"from_torchvision: {_name(source)} is not a torchvision VisionTransformer (vit_b_16).")
        num_heads = num_heads or source.encoder.layers[0].self_attention.num_heads
        image_size = image_size or source.image_size
        src = source.state_dict()
    else:
        src = dict(model_or_state_dict)
    if "conv_proj.weight" not in src:
        raise ValueError(
            "not a torchvision VisionTransformer state dict (no 'conv_proj.weight'); "
            "conv-stem variants (conv_proj.conv_*) are not supported."
        )
    sd = {}
    for k, v in src.items():
        if block := re.match(r"encoder\.layers\.encoder_layer_(\d+)\.(.*)", k):
            i, rest = block.groups()
            old = next((o for o in _TORCHVISION_BLOCK if rest.startswith(o)), None)
            if old is None:
                raise ValueError(f"from_torchvision: {k} is not a tensor of a plain ViT encoder block.")
            sd[f"blocks.{i}.{_TORCHVISION_BLOCK[old]}{rest[len(old) :]}"] = v
        elif old := next((o for o in _TORCHVISION if k.startswith(o)), None):
            sd[_TORCHVISION[old] + k[len(old) :]] = v
    dim = src["conv_proj.weight"].shape[0]
    num_heads = num_heads or heads_for_width(dim)
    if num_heads is None:
        raise ValueError(
            f"from_torchvision: the number of heads cannot be read from the weights of width {dim} (not a "
            f"width of Table 1); pass num_heads=."
        )
    model = _load(sd, "from_torchvision", num_heads, image_size)
    return model if source is None else _same_logits(source, model, "from_torchvision")


def _name(model: nn.Module) -> str:
    return f"{type(model).__module__}.{type(model).__name__}"


def _same_logits(source: nn.Module, model: VisionTransformer, name: str) -> VisionTransformer:
    """`model`, once its logits on a random batch match the source's (both in eval mode); else refuse."""
    was_training, p = source.training, next(source.parameters())
    x = torch.randn(2, model.config.in_channels, *model.image_size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, got = source.eval()(x.to(p)).float().cpu(), model.eval()(x)
    source.train(was_training), model.train()
    gap, scale = (want - got).abs().max().item(), want.abs().max().item()
    if not gap <= (1e-3 if p.dtype == torch.float32 else 3e-2) * max(1.0, scale):
        raise ValueError(
            f"{name}: the converted logits differ from the source's by up to {gap:.3g} (largest logit "
            f"{scale:.3g}) on a random batch: the source has a part vitlib does not map; not converted."
        )
    return model


# -------------------------------------------------------------------------------------------------------- timm
def _check_timm(model: nn.Module) -> None:
    """Refuse, by name, what a vitlib ViT cannot express."""

    def has(module: nn.Module, name: str) -> bool:  # a layer that is not an nn.Identity
        return not isinstance(getattr(module, name, nn.Identity()), nn.Identity)

    if "VisionTransformer" not in [c.__name__ for c in type(model).__mro__] or not hasattr(model, "blocks"):
        raise ValueError(f"from_timm: {_name(model)} is not a timm VisionTransformer (vit_*, deit_*).")
    block, pool = model.blocks[0], getattr(model, "global_pool", "token")
    act = getattr(block.mlp, "act", None)
    unsupported = {
        "distillation tokens (dist_token, a distilled DeiT)": getattr(model, "dist_token", None) is not None,
        "the lack of a position embedding (pos_embed=None)": getattr(model, "pos_embed", None) is None,
        f"an MLP activation {type(act).__name__} (vitlib's is GELU)": getattr(act, "approximate", "") != "none",
        "register tokens (reg_tokens)": getattr(model, "num_reg_tokens", 0),
        "a pre-norm (pre_norm, CLIP style)": has(model, "norm_pre"),
        "position embeddings without the [class] row (no_embed_class)": getattr(model, "no_embed_class", False),
        "LayerScale (init_values)": has(block, "ls1"),
        "qk-norm (qk_norm)": has(block.attn, "q_norm"),
        "an attention projection without bias (proj_bias=False)": block.attn.proj.bias is None,
        "a LayerNorm after pooling (fc_norm; build the timm model with fc_norm=False)": has(model, "fc_norm"),
        f"global_pool={pool!r} (vitlib pools by 'token' or 'avg')": pool not in ("token", "avg"),
    }
    if found := [what for what, present in unsupported.items() if present]:
        raise ValueError(f"from_timm: vitlib's ViT cannot express {', '.join(found)} of this timm ViT.")


def from_timm(model: nn.Module) -> VisionTransformer:
    """A timm `VisionTransformer` (any size, GAP or no head) as a vitlib model with the same weights (same names)."""
    _check_timm(model)
    pool = "cls" if model.global_pool == "token" else "gap"
    grid = tuple(model.patch_embed.grid_size)
    converted = _load(model.state_dict(), "from_timm", model.blocks[0].attn.num_heads, grid=grid, pool=pool)
    return _same_logits(model, converted, "from_timm")


# ------------------------------------------------------------------------------------------------ original JAX
def from_jax_npz(path: str | Path, image_size: int | tuple[int, int] | None = None) -> VisionTransformer:
    """An original release's `.npz` (the layout timm reads), [class] token or 'gap'; square unless `image_size`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}: download an original ViT .npz (e.g. ViT-B_16.npz) there.")
    w = {k: torch.from_numpy(np.asarray(v)).float() for k, v in np.load(path).items()}
    if "embedding/kernel" not in w:
        raise ValueError(
            f"{path} is not an original ViT checkpoint: no 'embedding/kernel' (first keys {sorted(w)[:3]})."
        )
    sd = {
        "patch_embed.proj.weight": w["embedding/kernel"].permute(3, 2, 0, 1),  # HWIO (P, P, C, D) -> (D, C, P, P)
        "patch_embed.proj.bias": w["embedding/bias"],
        "pos_embed": w["Transformer/posembed_input/pos_embedding"],
        "norm.weight": w["Transformer/encoder_norm/scale"],
        "norm.bias": w["Transformer/encoder_norm/bias"],
        "head.weight": w["head/kernel"].T,
        "head.bias": w["head/bias"],
    }
    if "cls" in w:
        sd["cls_token"] = w["cls"]
    if "pre_logits/kernel" in w:
        sd["pre_logits.0.weight"], sd["pre_logits.0.bias"] = w["pre_logits/kernel"].T, w["pre_logits/bias"]
    for i in range(len({k.split("/")[1] for k in w if k.startswith("Transformer/encoderblock_")})):  # the L blocks
        sd.update(_jax_block(w, f"Transformer/encoderblock_{i}/", f"blocks.{i}."))
    heads = w["Transformer/encoderblock_0/MultiHeadDotProductAttention_1/query/kernel"].shape[1]
    return _load(sd, f"from_jax_npz({path.name})", heads, image_size, pool="cls" if "cls" in w else "gap")


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
