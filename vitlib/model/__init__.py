"""The paper's model (section 3.1): patches, E, [class], E_pos, attention, the encoder block, the heads, the ViT and
its variants (Table 1), hybrid stems, CNN baselines, and the converters from torchvision, timm and the JAX release."""

from .attention import MultiHeadSelfAttention, RelativePosition, attention_weights, record_attention
from .cnn import SmallResNet, create_cnn, is_cnn_name
from .config import POS_EMBED_KINDS, VARIANTS, ViTConfig, heads_for_width, parse_name
from .convert import from_jax_npz, from_timm, from_torchvision
from .embedding import ClassToken, PatchEmbedding
from .encoder import MLP, DropPath, EncoderBlock, PostNormEncoderBlock
from .heads import ClassifierHead, finetuning_head, pretraining_head
from .hybrid import HybridEmbedding, hybrid_stem, resnet_stem, small_resnet_stem
from .patches import check_patch_size, patchify, unpatchify
from .position import PositionEmbedding, resample_pos_embed, sincos_2d
from .vit import VisionTransformer, count_parameters, create_model

__all__ = [
    "MultiHeadSelfAttention",
    "RelativePosition",
    "attention_weights",
    "record_attention",
    "SmallResNet",
    "create_cnn",
    "is_cnn_name",
    "POS_EMBED_KINDS",
    "VARIANTS",
    "ViTConfig",
    "heads_for_width",
    "parse_name",
    "from_jax_npz",
    "from_timm",
    "from_torchvision",
    "ClassToken",
    "PatchEmbedding",
    "MLP",
    "DropPath",
    "EncoderBlock",
    "PostNormEncoderBlock",
    "ClassifierHead",
    "finetuning_head",
    "pretraining_head",
    "HybridEmbedding",
    "hybrid_stem",
    "resnet_stem",
    "small_resnet_stem",
    "check_patch_size",
    "patchify",
    "unpatchify",
    "PositionEmbedding",
    "resample_pos_embed",
    "sincos_2d",
    "VisionTransformer",
    "count_parameters",
    "create_model",
]
