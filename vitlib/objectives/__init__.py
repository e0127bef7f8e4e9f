"""Objectives behind one interface (`objective`): classification, MAE, the paper's masked patch prediction (section
4.6), token labelling; and DINO (`dino`), which `course.dino` trains with its own step."""

from torch import nn

from ..model import VisionTransformer
from .dino import DINO, DINOHead, dino_loss, teacher_momentum, updated_centre
from .mae import MAE, random_masking
from .mpp import MaskedPatchPrediction, corruption_plan, mean_colour_targets
from .objective import OBJECTIVES, Classification, get_objective, objective_name
from .token_labelling import TokenLabelling, dense_scores, token_loss, token_targets


def wrap(name: str, vit: VisionTransformer, mean=(0.0,), std=(1.0,)) -> nn.Module:
    """The model a run of objective `name` trains: the ViT, or it inside MAE or MaskedPatchPrediction (`mean` / `std`:
    the loader's normalisation, which MPP undoes); TokenLabelling(vit, teacher) is built by hand."""
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
