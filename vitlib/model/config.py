"""`ViTConfig`, the one frozen description of a model (built, costed, converted, checkpointed); Table 1, its names."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..utils import pair
from .cnn import TORCHVISION_RESNETS, small_resnet_name
from .patches import check_patch_size

POS_EMBED_KINDS = ("learned", "none", "learned2d", "sincos2d", "relative")
POOLS = ("cls", "gap")

# Table 1 (plus ViT-Ti from DeiT) and two course sizes that train on a 2-core CPU in minutes.
VARIANTS = {
    "Ti": dict(dim=192, depth=12, heads=3, mlp_dim=768),
    "S": dict(dim=384, depth=12, heads=6, mlp_dim=1536),
    "B": dict(dim=768, depth=12, heads=12, mlp_dim=3072),
    "L": dict(dim=1024, depth=24, heads=16, mlp_dim=4096),
    "H": dict(dim=1280, depth=32, heads=16, mlp_dim=5120),
    "Micro": dict(dim=64, depth=4, heads=4, mlp_dim=128),
    "Mini": dict(dim=128, depth=6, heads=4, mlp_dim=256),
}
_ALIASES = {"Tiny": "Ti", "Small": "S", "Base": "B", "Large": "L", "Huge": "H"}
_NAME = re.compile(r"^(?:R(?P<cnn>\d+)(?:-w(?P<width>\d+))?\+)?ViT-(?P<size>[A-Za-z]+)/(?P<patch>\d+)$")


def check_heads(dim: int, heads: int) -> None:
    """Raise a clear error when the width D cannot be split into `heads` heads of D/heads features each."""
    if dim % heads:
        raise ValueError(
            f"width dim={dim} is not divisible by heads={heads}: each head gets dim/heads features, "
            f"so choose heads among {[h for h in range(1, dim + 1) if dim % h == 0 and h <= 64]}."
        )


@dataclass(frozen=True)
class ViTConfig:
    """Every option of a VisionTransformer (section 3.1; the variants of appendix D as options)."""

    image_size: int | tuple[int, int] = 224  # H = W, or (H, W)
    patch_size: int = 16  # P (for a hybrid: the CNN's total stride)
    in_channels: int = 3  # C
    num_classes: int = 1000  # K; 0: no head (features only)
    dim: int = 768  # D
    depth: int = 12  # L
    heads: int = 12
    mlp_dim: int = 3072
    pos_embed: str = "learned"  # POS_EMBED_KINDS (appendix D.4)
    pool: str = "cls"  # 'cls' ([class] token, eq. 4) or 'gap' (global average pooling, appendix D.3)
    class_token: bool | None = None  # None: when pool is 'cls'
    head_hidden: int | None = None  # the pre-training head's tanh layer; None: a zero-initialised linear head
    dropout: float = 0.0
    attn_dropout: float = 0.0
    drop_path: float = 0.0  # stochastic depth of the deepest block (not in the paper)
    qkv_bias: bool = True
    norm_first: bool = True  # pre-LN (the paper); False: the original Transformer's post-LN
    hybrid: str | None = None  # a CNN stem: 'resnet50' (torchvision) or 'ResNet-8[-w<width>]' (small)

    def __post_init__(self):
        if not isinstance(self.image_size, int):
            object.__setattr__(self, "image_size", pair(self.image_size, "image_size"))
        if self.pool not in POOLS:
            raise ValueError(f"unknown pool {self.pool!r}: use 'cls' ([class] token, eq. 4) or 'gap' (global average).")
        if self.class_token is None:
            object.__setattr__(self, "class_token", self.pool == "cls")
        if self.pool == "cls" and not self.class_token:
            raise ValueError("pool='cls' needs the [class] token: set class_token=True or pool='gap'.")
        check_heads(self.dim, self.heads)
        if self.pos_embed not in POS_EMBED_KINDS:
            raise ValueError(f"unknown position embedding {self.pos_embed!r}: one of {', '.join(POS_EMBED_KINDS)}.")
        if self.hybrid is None:
            check_patch_size(self.image_size, self.patch_size)

    size = property(lambda self: pair(self.image_size), doc="(H, W)")
    num_prefix_tokens = property(lambda self: 1 if self.class_token else 0)

    @property
    def variant(self) -> str | None:
        """The options that make this a variant of the paper's ViT (vitlib.model.variants), or None."""
        found = [f"pos_embed={self.pos_embed!r}"] if self.pos_embed not in ("learned", "none") else []
        found += ["norm_first=False"] if not self.norm_first else []
        found += [f"hybrid={self.hybrid!r}"] if self.hybrid else []
        return ", ".join(found) or None

    def replace(self, **changes) -> ViTConfig:
        """A new config with some options changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain JSON-ready values (a rectangular image size as a list), as checkpoints store them."""
        out = dataclasses.asdict(self)
        if isinstance(self.image_size, tuple):
            out["image_size"] = list(self.image_size)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> ViTConfig:
        """The config `to_dict` wrote; an unknown key is an error that names it."""
        known = {f.name for f in dataclasses.fields(cls)}
        if unknown := sorted(set(values) - known):
            raise ValueError(f"not ViTConfig options: {unknown}; the options are {sorted(known)}.")
        return cls(**values)


def parse_name(name: str) -> dict:
    """'ViT-B/16' -> Table 1's B with P=16 as ViTConfig options; 'R50+ViT-B/16' the hybrid on torchvision's ResNet-50
    (stride 16), 'R8+ViT-Micro/4' (or 'R8-w8+...', width 8) on a small ResNet-8 (vitlib.model.cnn), stride 4."""
    m = _NAME.match(name.strip())
    size = _ALIASES.get(m["size"], m["size"]) if m else None
    if not m or size not in VARIANTS:
        raise ValueError(
            f"unknown model variant {name!r}: use 'ViT-<size>/<patch>' with size one of {', '.join(VARIANTS)} "
            f"(e.g. 'ViT-B/16', 'ViT-Micro/4'), or a hybrid 'R50+ViT-B/16' / 'R8+ViT-Micro/4'."
        )
    out = dict(VARIANTS[size], patch_size=int(m["patch"]))
    if m["cnn"]:
        depth, width = int(m["cnn"]), int(m["width"]) if m["width"] else None
        tv = f"resnet{depth}"  # torchvision's ResNet of that depth, if there is one
        out["hybrid"] = tv if tv in TORCHVISION_RESNETS and width is None else small_resnet_name(depth, width)
    return out


def heads_for_width(dim: int) -> int | None:
    """The heads Table 1 (and DeiT's Ti) gives a width (192 -> 3, 768 -> 12, ...), or None for another width."""
    return {VARIANTS[k]["dim"]: VARIANTS[k]["heads"] for k in ("Ti", "S", "B", "L", "H")}.get(dim)
