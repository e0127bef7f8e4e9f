"""Objectives: classification (the paper's supervised pre-training and fine-tuning), MAE, the paper's masked patch
prediction (section 4.6) and token labelling (LV-ViT), behind the one interface of `vitlib.objectives.objective`; and
DINO's self-distillation (`vitlib.objectives.dino`), which `course.dino` trains with its own step."""

from torch import nn

from ..model import VisionTransformer
from .dino import DINO, DINOHead, dino_loss, teacher_momentum, updated_centre
from .mae import MAE, random_masking
from .mpp import MaskedPatchPrediction, corruption_plan, mean_colour_targets
from .objective import (
    OBJECTIVES,
    Classification,
    SelfSupervised,
    StepLoss,
    Supervised,
    get_objective,
    objective_name,
    soft_cross_entropy,
)
from .token_labelling import TokenLabelling, dense_scores, token_loss, token_targets


def wrap(name: str, vit: VisionTransformer, mean=(0.0,), std=(1.0,)) -> nn.Module:
    """The model a run of objective `name` trains: the ViT itself for 'classify', else the ViT inside MAE or
    MaskedPatchPrediction (`mean` / `std`: the loader's normalisation, which masked patch prediction undoes).
    Token labelling needs a trained teacher, so its model is built by hand: TokenLabelling(vit, teacher)."""
    if name == "mae":
        return MAE(vit)
    if name == "mpp":
        return MaskedPatchPrediction(vit, mean=mean, std=std)
    if name == "token":
        raise ValueError(
            "objective 'token' needs a trained teacher CNN: pass model=TokenLabelling(vit, teacher, beta=0.5) "
            "to vitlib.train.train."
        )
    get_objective(name)  # a clear error for an unknown name
    return vit
