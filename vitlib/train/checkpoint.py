"""A run's safetensors files, written atomically. out/checkpoint.safetensors: model (and EMA) weights, optimiser and
scheduler state, RNG states and the data position, as whole tensors (FSDP gathers them onto rank 0, so a run resumes
with any number of processes). out/model.safetensors: the model and its config, for `load_pretrained` (transfer)."""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from .._version import __version__
from ..model import VisionTransformer, ViTConfig, build_vit
from ..utils import replace_atomically
from .distributed import rank0_error

FORMAT = "vitlib-checkpoint-1"
CHECKSUM = "sha256"  # the metadata key of the tensors' checksum (checkpoints before it have none)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: corrupt, not a vitlib checkpoint, or for another architecture."""


def tensor_checksum(tensors: dict) -> str:
    """sha256 over every tensor's name, dtype, shape and raw bytes, in sorted name order (stored in the metadata)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{tuple(t.shape)}|".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _part(tensors: dict, prefix: str) -> dict:
    """The tensors whose names start with `prefix` ('model.', 'ema.', ...), named without it."""
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}


def _unflatten_optimizer(tensors: dict, meta: dict) -> dict:
    state: dict = {}
    for key, value in _part(tensors, "optim.").items():
        i, k = key.split(".", 1)
        state.setdefault(int(i), {})[k] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(path, model, optimizer=None, scheduler=None, ema=None, progress=None, meta=None, gathered=None):
    """Write all a run needs to continue exactly to `path`; `gathered`: a sharded model's `gather_full_state`."""
    path, (model_state, optimizer_state) = Path(path), gathered or (None, None)
    weights = model.state_dict() if model_state is None else model_state
    tensors = {f"model.{k}": v.detach().contiguous().cpu() for k, v in weights.items()}
    info = {"format": FORMAT, "progress": progress or {}, **(meta or {})}
    if ema is not None:
        tensors.update({f"ema.{k}": v.detach().contiguous().cpu() for k, v in ema.state_dict().items()})
    if optimizer is not None:  # optim.<parameter number>.<name>: the tensors; the param_groups go in the metadata
        state = optimizer.state_dict() if optimizer_state is None else optimizer_state
        info["optimizer"] = {"param_groups": state["param_groups"]}
        for i, s in state["state"].items():
            tensors.update({f"optim.{i}.{k}": v.contiguous().cpu() for k, v in s.items() if torch.is_tensor(v)})
    if scheduler is not None:
        info["scheduler"] = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    info["rng.python"] = random.getstate()
    info[CHECKSUM] = tensor_checksum(tensors)
    metadata = {k: json.dumps(v) for k, v in info.items()}
    return replace_atomically(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def read_checkpoint(path: str | Path, tensors: bool = True) -> tuple[dict, dict]:
    """(tensors, metadata) of a checkpoint, verified; tensors=False: (each tensor's shape, metadata), unverified."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}.")
    try:
        with safe_open(str(path), "pt") as f:
            raw = f.metadata() or {}
            shapes = None if tensors else {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        content = load_file(str(path)) if tensors else shapes
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"{path} is not a readable checkpoint ({err}): it is corrupt or was cut short. "
            f"Delete it to start afresh, or point to another checkpoint."
        ) from err
    try:
        meta = {k: json.loads(v) for k, v in raw.items()}
    except ValueError:  # safetensors from elsewhere (model.safetensors, a hub) have plain-text metadata
        meta = {}
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a vitlib training checkpoint (format {meta.get('format')!r}).")
    expected = meta.get(CHECKSUM)
    if tensors and expected is None:
        warnings.warn(
            f"{path} has no checksum (written before vitlib checked checkpoints): its tensors cannot be verified "
            f"and are loaded as they are. The next checkpoint this run writes has one.",
            stacklevel=3,
        )
    elif tensors and (found := tensor_checksum(content)) != expected:
        raise CheckpointError(
            f"{path} fails its checksum (sha256 of its tensors {found[:12]}..., written as {expected[:12]}...): its "
            f"tensor data changed after it was saved (a damaged disk or copy, or a program that wrote into it), so "
            f"its weights cannot be trusted. Resume from an intact copy, or delete it to start afresh. The file was "
            f"left as it is."
        )
    return content, meta


def _check_fits(path, meta: dict, shapes: dict, model, model_config: dict | None) -> None:
    """Raise a CheckpointError, before anything is loaded, if the checkpoint is not for `model`."""
    if model_config is not None and meta.get("model_config") not in (None, model_config):
        saved = meta["model_config"]
        diff = {k: (saved.get(k), v) for k, v in model_config.items() if saved.get(k) != v}
        raise CheckpointError(
            f"{path} was written for another model (checkpoint vs this run: {diff}). Use another "
            f"output folder, or resume with the same model options. The checkpoint is left as it is."
        )
    weights = {k: tuple(v) for k, v in _part(shapes, "model.").items()}
    own = model.state_dict()  # under FSDP: DTensors, whose shape is the whole tensor's
    missing, unexpected = [k for k in own if k not in weights], [k for k in weights if k not in own]
    shapes = [f"{k} {v} vs {tuple(own[k].shape)}" for k, v in weights.items() if k in own and v != tuple(own[k].shape)]
    if missing or unexpected or shapes:  # checked before anything is loaded: the model is left as it was
        raise CheckpointError(
            f"{path} does not fit this model (missing {missing[:5]}, unexpected {unexpected[:5]}, "
            f"other shapes (checkpoint vs model) {shapes[:5]})."
        )


def _restore_schedule_and_rng(tensors: dict, meta: dict, scheduler) -> None:
    if scheduler is not None and "scheduler" in meta:
        scheduler.load_state_dict({**scheduler.state_dict(), **meta["scheduler"]})
    torch.set_rng_state(tensors["rng.cpu"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    if "rng.python" in meta:
        state = meta["rng.python"]
        random.setstate((state[0], tuple(state[1]), state[2]))


def load_checkpoint(path, model, optimizer=None, scheduler=None, ema=None, model_config=None, sharded=False) -> dict:
    """Restore a run from `path` after checking the architecture; returns the metadata (progress, history, ...)."""
    if sharded:
        return _load_sharded(path, model, optimizer, scheduler, model_config)
    tensors, meta = read_checkpoint(path)
    _check_fits(path, meta, {k: v.shape for k, v in tensors.items()}, model, model_config)
    model.load_state_dict(_part(tensors, "model."))
    if ema is not None:
        ema.load_state_dict(_part(tensors, "ema."))
    if optimizer is not None and "optimizer" in meta:
        optimizer.load_state_dict(_unflatten_optimizer(tensors, meta["optimizer"]))
    _restore_schedule_and_rng(tensors, meta, scheduler)
    return meta


# ------------------------------------------------------------------------------------------ FSDP-sharded models
def _parameter_names(model, optimizer) -> list[str]:
    """The name of each of the optimiser's parameters, in the order optimizer.state_dict() numbers them."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def gather_full_state(model, optimizer=None) -> tuple[dict, dict | None]:
    """(weights, optimiser state) of an FSDP-sharded model, whole, on rank 0's CPU (a collective; others get {})."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=options)
    if optimizer is None:
        return weights, None
    by_name = get_optimizer_state_dict(model, optimizer, options=options)  # keyed by parameter name
    if not by_name:
        return weights, {}
    names = _parameter_names(model, optimizer)
    state = {i: by_name["state"][name] for i, name in enumerate(names) if name in by_name["state"]}
    return weights, {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}


def _load_sharded(path, model, optimizer, scheduler, model_config) -> dict:
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    shapes, meta = read_checkpoint(path, tensors=False)  # every process checks the header: the same verdict on all
    _check_fits(path, meta, shapes, model, model_config)
    error = None
    if dist.get_rank() == 0:
        try:  # rank 0 alone reads the tensors and checks their checksum
            tensors, _ = read_checkpoint(path)
        except CheckpointError as err:
            error = str(err)
    message = rank0_error(error)  # every process learns rank 0's verdict
    if message is not None:
        raise CheckpointError(message)
    if dist.get_rank() != 0:
        with safe_open(str(path), "pt") as f:
            tensors = {k: f.get_tensor(k) for k in shapes if k.startswith("rng.")}
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, _part(tensors, "model."), options=options)
    if optimizer is not None and "optimizer" in meta:
        state = {}
        if dist.get_rank() == 0:
            names = _parameter_names(model, optimizer)
            numbered = _unflatten_optimizer(tensors, meta["optimizer"])
            state = {
                "state": {names[i]: s for i, s in numbered["state"].items()},
                "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in numbered["param_groups"]],
            }
        set_optimizer_state_dict(model, optimizer, state, options=options)
        for group, saved in zip(optimizer.param_groups, meta["optimizer"]["param_groups"]):  # lr & co. on every rank
            group.update({k: v for k, v in saved.items() if k != "params"})
    _restore_schedule_and_rng(tensors, meta, scheduler)
    return meta


# ------------------------------------------------------------------------------ the trained model: model.safetensors
def save_model(model: nn.Module, out: Path, model_config: dict, sharded: bool = False, rank: int = 0) -> None:
    """out/model.safetensors: the whole weights, the model's configuration and vitlib's version."""
    weights = gather_full_state(model)[0] if sharded else model.state_dict()  # sharded: a collective
    if rank != 0:
        return
    tensors = {k: v.contiguous().cpu() for k, v in weights.items()}
    metadata = {"model_config": json.dumps(model_config), "vitlib": __version__}
    replace_atomically(Path(out) / "model.safetensors", lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def load_pretrained(path: str | Path) -> VisionTransformer:
    """The ViT a run saved in `path` (its folder or model.safetensors): with its head, or headless after MAE / MPP
    (the encoder only); `vitlib.analysis.finetune.prepare_for_finetuning` puts the zero-initialised head on."""
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
    if kind not in ("VisionTransformer", "MAE", "MaskedPatchPrediction", "TokenLabelling"):
        raise ValueError(f"{file} holds a {kind}, not a ViT: only ViTs can be loaded for fine-tuning.")
    state = load_file(str(file))
    if objective != "classify":
        state = _part(state, "vit.")
    model = build_vit(ViTConfig.from_dict(config))
    model.load_state_dict(state)
    return model
