"""vitlib: the Vision Transformer of "An Image is Worth 16x16 Words" (Dosovitskiy et al., 2020), built to be read and
to train with. Five layers, each importing only from those before it:

    vitlib.model        the paper's model, read top to bottom in vitlib/model/vit.py; its variants; the converters
    vitlib.data         data sets, subsets, loaders, augmentation
    vitlib.objectives   what a run minimises: classification, MAE, masked patch prediction, token labelling, DINO
    vitlib.train        the engine: TrainConfig and presets, the loop, optimiser, checkpoints, EMA, DDP/FSDP, CLI
    vitlib.analysis     what a study of a ViT measures: attention distance and rollout, E and E_pos, FLOPs, probes,
                        fine-tuning at another resolution

The course built on it (experiments, statistics, the claims report) is the package `course`, the grader `classroom`;
vitlib imports neither.
"""

from ._version import __version__
from .model import (
    MLP,
    VARIANTS,
    EncoderBlock,
    MultiHeadSelfAttention,
    PatchEmbedding,
    VisionTransformer,
    ViTConfig,
    build_vit,
    check_patch_size,
    count_parameters,
    create_model,
    from_jax_npz,
    from_timm,
    from_torchvision,
    parse_name,
    patchify,
    record_attention,
    resample_pos_embed,
    unpatchify,
)
