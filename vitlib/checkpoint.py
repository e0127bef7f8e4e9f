"""Checkpoints in one safetensors file: model (and EMA) weights, optimiser and scheduler state, RNG states and the
data position; written atomically (a temporary file, then a rename), so a killed run never leaves a broken one."""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

FORMAT = "vitlib-checkpoint-1"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: corrupt, not a vitlib checkpoint, or for another architecture."""


def _flatten_optimizer(state: dict) -> tuple[dict, dict]:
    tensors = {f"optim.{i}.{k}": v for i, s in state["state"].items() for k, v in s.items() if torch.is_tensor(v)}
    return tensors, {"param_groups": state["param_groups"]}


def _unflatten_optimizer(tensors: dict, meta: dict) -> dict:
    state: dict = {}
    for key, value in tensors.items():
        _, i, k = key.split(".", 2)
        state.setdefault(int(i), {})[k] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(path: str | Path, model: torch.nn.Module, optimizer=None, scheduler=None, ema=None,
                    progress: dict | None = None, meta: dict | None = None) -> Path:
    """Write everything needed to continue a run exactly, atomically, to `path` (a .safetensors file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    info = {"format": FORMAT, "progress": progress or {}, **(meta or {})}
    if ema is not None:
        tensors.update({f"ema.{k}": v.detach().contiguous().cpu() for k, v in ema.state_dict().items()})
    if optimizer is not None:
        opt_tensors, info["optimizer"] = _flatten_optimizer(optimizer.state_dict())
        tensors.update({k: v.contiguous().cpu() for k, v in opt_tensors.items()})
    if scheduler is not None:
        info["scheduler"] = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    info["rng.python"] = random.getstate()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        save_file(tensors, str(tmp), metadata={k: json.dumps(v) for k, v in info.items()})
        os.replace(tmp, path)  # atomic on POSIX: readers see the old file or the new one, never half of one
    finally:
        tmp.unlink(missing_ok=True)  # a failed write (disk full, ...) leaves the previous checkpoint and no debris
    return path


def read_checkpoint(path: str | Path) -> tuple[dict, dict]:
    """(tensors, metadata) of a checkpoint, or a CheckpointError that says what is wrong with the file."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}.")
    try:
        tensors = load_file(str(path))
        from safetensors import safe_open
        with safe_open(str(path), "pt") as f:
            raw = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path} is not a readable checkpoint ({err}): it is corrupt or was cut short. "
                              f"Delete it to start afresh, or point to another checkpoint.") from err
    try:
        meta = {k: json.loads(v) for k, v in raw.items()}
    except ValueError:  # safetensors from elsewhere (model.safetensors, a hub) have plain-text metadata
        meta = {}
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a vitlib training checkpoint (format {meta.get('format')!r}).")
    return tensors, meta


def load_checkpoint(path, model, optimizer=None, scheduler=None, ema=None, model_config: dict | None = None) -> dict:
    """Restore a run from `path`; checks the architecture first. Returns the metadata (progress, history, ...)."""
    tensors, meta = read_checkpoint(path)
    if model_config is not None and meta.get("model_config") not in (None, model_config):
        diff = {k: (meta["model_config"].get(k), v) for k, v in model_config.items() if meta["model_config"].get(k) != v}
        raise CheckpointError(f"{path} was written for another model (checkpoint vs this run: {diff}). Use another "
                              f"output folder, or resume with the same model options. The checkpoint is left as it is.")
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    own = model.state_dict()
    missing, unexpected = [k for k in own if k not in weights], [k for k in weights if k not in own]
    shapes = [f"{k} {tuple(v.shape)} vs {tuple(own[k].shape)}" for k, v in weights.items() if k in own and v.shape != own[k].shape]
    if missing or unexpected or shapes:  # checked before anything is loaded: the model is left as it was
        raise CheckpointError(f"{path} does not fit this model (missing {missing[:5]}, unexpected {unexpected[:5]}, "
                              f"other shapes (checkpoint vs model) {shapes[:5]}).")
    model.load_state_dict(weights)
    if ema is not None:
        ema.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("ema.")})
    if optimizer is not None and "optimizer" in meta:
        optimizer.load_state_dict(_unflatten_optimizer({k: v for k, v in tensors.items() if k.startswith("optim.")},
                                                       meta["optimizer"]))
    if scheduler is not None and "scheduler" in meta:
        scheduler.load_state_dict({**scheduler.state_dict(), **meta["scheduler"]})
    torch.set_rng_state(tensors["rng.cpu"])
    if "rng.cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng.cuda"])
    if "rng.python" in meta:
        state = meta["rng.python"]
        random.setstate((state[0], tuple(state[1]), state[2]))
    return meta
