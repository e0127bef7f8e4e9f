"""The trained model of a run: `out/model.safetensors` with its configuration in the metadata, written at the end of
`train`, and `load_pretrained`, which builds the ViT again from it (for transfer: `vitlib.analysis.finetune`)."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from .._version import __version__
from ..model import VisionTransformer, ViTConfig, build_vit
from ..utils import replace_atomically
from .checkpoint import gather_full_state

VIT_KINDS = ("VisionTransformer", "MAE", "MaskedPatchPrediction", "TokenLabelling")


def save_model(model: nn.Module, out: Path, model_config: dict, sharded: bool = False, rank: int = 0) -> None:
    """out/model.safetensors: the weights (whole, also from an FSDP-sharded model: every process must call this
    then) and, in the metadata, the model's configuration and vitlib's version; written atomically."""
    weights = gather_full_state(model)[0] if sharded else None  # a collective: every process takes part
    if rank != 0:
        return
    weights = model.state_dict() if weights is None else weights
    tensors = {k: v.contiguous().cpu() for k, v in weights.items()}
    metadata = {"model_config": json.dumps(model_config), "vitlib": __version__}
    replace_atomically(Path(out) / "model.safetensors", lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def load_pretrained(path: str | Path) -> VisionTransformer:
    """The ViT that `vitlib.train` saved in `path` (a run folder or its model.safetensors), built from the saved
    configuration: with its pre-training head after supervised pre-training, headless after MAE / MPP (only the
    encoder is kept: the decoder, [mask] token and predictor belong to the pre-training task). Then
    `vitlib.analysis.finetune.prepare_for_finetuning` puts the zero-initialised head on."""
    path = Path(path)
    file = path / "model.safetensors" if path.is_dir() else path
    if not file.exists():
        raise FileNotFoundError(
            f"no pre-trained model at {file}: give the output folder of a vitlib.train run "
            f"(it holds model.safetensors once the run has finished)."
        )
    with safe_open(str(file), "pt") as f:
        meta = f.metadata() or {}
    if "model_config" not in meta:
        raise ValueError(f"{file} has no model_config in its metadata: it was not written by vitlib.train.")
    config = json.loads(meta["model_config"])
    kind, objective = config.pop("kind", "VisionTransformer"), config.pop("objective", "classify")
    if kind not in VIT_KINDS:
        raise ValueError(f"{file} holds a {kind}, not a ViT: only ViTs can be loaded for fine-tuning.")
    state = load_file(str(file))
    if objective != "classify":
        state = {k[len("vit.") :]: v for k, v in state.items() if k.startswith("vit.")}
    model = build_vit(ViTConfig.from_dict(config))
    model.load_state_dict(state)
    return model
