"""vitlib: the Vision Transformer of "An Image is Worth 16x16 Words" (Dosovitskiy et al., 2020), built to be read.

Four layers, each importing only from those before it:

    vitlib.model        the paper's model: patches, E, [class], E_pos, attention, encoder, heads, ViT, converters
    vitlib.data         data sets, subsets, loaders, augmentation
    vitlib.objectives   what a run minimises: classification, MAE, masked patch prediction, token labelling
    vitlib.train        the engine: config and presets, the loop, optimiser, checkpoints, EMA, DDP/FSDP, CLI
    vitlib.studies      what the notebooks run: experiments and verdicts, sweeps, costs, inspection, probes, plots
"""

import os as _os

# Sweeps run in worker processes forked from this one (vitlib.studies.parallel), and a forked process cannot use CUDA
# once its parent has started the CUDA driver, which torch.cuda.is_available() does unless NVML answers it instead.
_os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

from ._version import __version__  # noqa: E402
from .model import (
    MLP,
    VARIANTS,
    ClassifierHead,
    ClassToken,
    EncoderBlock,
    HybridEmbedding,
    MultiHeadSelfAttention,
    PatchEmbedding,
    PositionEmbedding,
    PostNormEncoderBlock,
    RelativePosition,
    VisionTransformer,
    ViTConfig,
    check_patch_size,
    count_parameters,
    create_model,
    finetuning_head,
    from_jax_npz,
    from_timm,
    from_torchvision,
    parse_name,
    patchify,
    pretraining_head,
    record_attention,
    resample_pos_embed,
    resnet_stem,
    sincos_2d,
    unpatchify,
)
from .model.config import POS_EMBED_KINDS

__all__ = [
    "__version__",
    "POS_EMBED_KINDS",
    "MLP",
    "VARIANTS",
    "ClassifierHead",
    "ClassToken",
    "EncoderBlock",
    "HybridEmbedding",
    "MultiHeadSelfAttention",
    "PatchEmbedding",
    "PositionEmbedding",
    "PostNormEncoderBlock",
    "RelativePosition",
    "VisionTransformer",
    "ViTConfig",
    "check_patch_size",
    "count_parameters",
    "create_model",
    "finetuning_head",
    "from_jax_npz",
    "from_timm",
    "from_torchvision",
    "parse_name",
    "patchify",
    "pretraining_head",
    "record_attention",
    "resample_pos_embed",
    "resnet_stem",
    "sincos_2d",
    "unpatchify",
]
