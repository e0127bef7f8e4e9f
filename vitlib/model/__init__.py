"""The paper's model (section 3.1): `vit` reads top to bottom (E, [class], E_pos, MSA, MLP, the block, the heads);
`variants` holds the variants one notebook each studies, `hybrid` the CNN stems, `cnn` the ResNet baselines,
`config` the one description of a model and Table 1, `create` a model by name, and `convert` the converters from
torchvision, timm and the JAX release."""

from .cnn import SmallResNet, create_cnn, is_cnn_name
from .config import POS_EMBED_KINDS, VARIANTS, ViTConfig, heads_for_width, parse_name
from .convert import from_jax_npz, from_timm, from_torchvision
from .create import create_model
from .hybrid import HybridEmbedding, hybrid_stem, resnet_stem, small_resnet_stem
from .patches import check_patch_size, patchify, resample_pos_embed, unpatchify
from .variants import (
    LearnedPosition2D,
    PostNormEncoderBlock,
    RelativeAttention,
    RelativePosition,
    SinCosPosition2D,
    VariantViT,
    build_vit,
    sincos_2d,
)
from .vit import (
    MLP,
    DropPath,
    EncoderBlock,
    MultiHeadSelfAttention,
    PatchEmbedding,
    VisionTransformer,
    attention_weights,
    count_parameters,
    record_attention,
)
