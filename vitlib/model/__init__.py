"""The paper's model (section 3.1): `vit` top to bottom, `variants` (and `create_model` by name), `hybrid` the CNN
stems, `cnn` the ResNet baselines, `config` (`ViTConfig`, Table 1), `convert` from torchvision, timm and JAX."""

from .cnn import SmallResNet, create_cnn, is_cnn_name
from .config import POS_EMBED_KINDS, VARIANTS, ViTConfig, heads_for_width, parse_name
from .convert import from_jax_npz, from_timm, from_torchvision
from .hybrid import HybridEmbedding, hybrid_stem, small_resnet_stem
from .patches import check_patch_size, patchify, resample_pos_embed, unpatchify
from .variants import (
    LearnedPosition2D,
    PostNormEncoderBlock,
    RelativeAttention,
    RelativePosition,
    SinCosPosition2D,
    VariantViT,
    build_vit,
    create_model,
    sincos_2d,
)
from .vit import (
    MLP,
    EncoderBlock,
    MultiHeadSelfAttention,
    PatchEmbedding,
    VisionTransformer,
    attention_weights,
    count_parameters,
    record_attention,
)
