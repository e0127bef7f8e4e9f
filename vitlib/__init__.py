"""vitlib: the Vision Transformer of "An Image is Worth 16x16 Words" (Dosovitskiy et al., 2020), built to be read."""
from .attention import MultiHeadSelfAttention, RelativePosition
from .convert import from_jax_npz, from_timm, from_torchvision
from .embedding import ClassToken, PatchEmbedding
from .encoder import MLP, EncoderBlock
from .heads import ClassifierHead, finetuning_head, pretraining_head
from .hybrid import HybridEmbedding, resnet_stem
from .model import VARIANTS, VisionTransformer, count_parameters, create_model, parse_name
from .patches import check_patch_size, patchify, unpatchify
from .position import POS_EMBED_KINDS, PositionEmbedding, resample_pos_embed, sincos_2d

__version__ = "0.1.0"
