"""Checkpoints in one safetensors file: model (and EMA) weights, optimiser and scheduler state, RNG states and the
data position; written atomically (a temporary file, then a rename), so a killed run never leaves a broken one.

The file always holds whole (unsharded) tensors: an FSDP-sharded run gathers them onto rank 0 first
(`gather_full_state`) and shards them again on resume (`load_checkpoint(..., sharded=True)`), so its checkpoint is the
same as an unsharded run's and continues with any number of processes, sharded or not."""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..utils import replace_atomically

FORMAT = "vitlib-checkpoint-1"
CHECKSUM = "sha256"  # the metadata key of the tensors' checksum (checkpoints before it have none)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: corrupt, not a vitlib checkpoint, or for another architecture."""


def tensor_checksum(tensors: dict) -> str:
    """sha256 over every tensor's name, dtype, shape and raw bytes, in sorted name order: what a checkpoint stores in
    its metadata and what loading it checks (a file whose tensor data was changed in place no longer matches)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{str(t.dtype).removeprefix('torch.')}|{tuple(t.shape)}|".encode())
        if t.numel():
            digest.update(t.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _verify(path: Path, tensors: dict, meta: dict) -> None:
    expected = meta.get(CHECKSUM)
    if expected is None:
        warnings.warn(
            f"{path} has no checksum (written before vitlib checked checkpoints): its tensors cannot be verified "
            f"and are loaded as they are. The next checkpoint this run writes has one.",
            UserWarning,
            stacklevel=4,
        )
        return
    found = tensor_checksum(tensors)
    if found != expected:
        raise CheckpointError(
            f"{path} fails its checksum (sha256 of its tensors {found[:12]}..., written as {expected[:12]}...): its "
            f"tensor data changed after it was saved (a damaged disk or copy, or a program that wrote into it), so "
            f"its weights cannot be trusted. Resume from an intact copy, or delete it to start afresh. The file was "
            f"left as it is."
        )


def _flatten_optimizer(state: dict) -> tuple[dict, dict]:
    tensors = {f"optim.{i}.{k}": v for i, s in state["state"].items() for k, v in s.items() if torch.is_tensor(v)}
    return tensors, {"param_groups": state["param_groups"]}


def _unflatten_optimizer(tensors: dict, meta: dict) -> dict:
    state: dict = {}
    for key, value in tensors.items():
        _, i, k = key.split(".", 2)
        state.setdefault(int(i), {})[k] = value
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    optimizer=None,
    scheduler=None,
    ema=None,
    progress: dict | None = None,
    meta: dict | None = None,
    model_state: dict | None = None,
    optimizer_state: dict | None = None,
) -> Path:
    """Write everything needed to continue a run exactly, atomically, to `path` (a .safetensors file). For a sharded
    model, `model_state` and `optimizer_state` are the whole state dicts from `gather_full_state`, written instead of
    model.state_dict() and optimizer.state_dict()."""
    path = Path(path)
    weights = model.state_dict() if model_state is None else model_state
    tensors = {f"model.{k}": v.detach().contiguous().cpu() for k, v in weights.items()}
    info = {"format": FORMAT, "progress": progress or {}, **(meta or {})}
    if ema is not None:
        tensors.update({f"ema.{k}": v.detach().contiguous().cpu() for k, v in ema.state_dict().items()})
    if optimizer is not None:
        opt_tensors, info["optimizer"] = _flatten_optimizer(
            optimizer.state_dict() if optimizer_state is None else optimizer_state
        )
        tensors.update({k: v.contiguous().cpu() for k, v in opt_tensors.items()})
    if scheduler is not None:
        info["scheduler"] = {k: v for k, v in scheduler.state_dict().items() if k != "lr_lambdas"}
    tensors["rng.cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng.cuda"] = torch.cuda.get_rng_state()
    info["rng.python"] = random.getstate()
    info[CHECKSUM] = tensor_checksum(tensors)
    metadata = {k: json.dumps(v) for k, v in info.items()}
    # a temporary file renamed over the old one: a failed write (disk full, ...) leaves the previous checkpoint whole
    return replace_atomically(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def read_checkpoint(path: str | Path, tensors: bool = True) -> tuple[dict, dict]:
    """(tensors, metadata) of a checkpoint, or a CheckpointError that says what is wrong with the file (also when its
    tensors fail the checksum stored in it; one without a checksum, from before, loads with a warning). With
    tensors=False only the header is read: (the shape of every tensor, metadata), unverified."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}.")
    try:
        from safetensors import safe_open

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
    if tensors:
        _verify(path, content, meta)
    return content, meta


def _check_fits(path, meta: dict, shapes: dict, model, model_config: dict | None) -> None:
    """Raise a CheckpointError, before anything is loaded, if the checkpoint (its tensors' shapes) is not for
    `model`."""
    if model_config is not None and meta.get("model_config") not in (None, model_config):
        diff = {
            k: (meta["model_config"].get(k), v) for k, v in model_config.items() if meta["model_config"].get(k) != v
        }
        raise CheckpointError(
            f"{path} was written for another model (checkpoint vs this run: {diff}). Use another "
            f"output folder, or resume with the same model options. The checkpoint is left as it is."
        )
    weights = {k[6:]: tuple(v) for k, v in shapes.items() if k.startswith("model.")}
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


def load_checkpoint(
    path, model, optimizer=None, scheduler=None, ema=None, model_config: dict | None = None, sharded: bool = False
) -> dict:
    """Restore a run from `path`; checks the architecture first. Returns the metadata (progress, history, ...).
    sharded=True: `model` is sharded with FSDP (every process calls this together): rank 0 reads the tensors and sends
    each process its shards (the optimiser's too); the others read only the header and the RNG states."""
    if sharded:
        return _load_sharded(path, model, optimizer, scheduler, model_config)
    tensors, meta = read_checkpoint(path)
    _check_fits(path, meta, {k: v.shape for k, v in tensors.items()}, model, model_config)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    if ema is not None:
        ema.load_state_dict({k[4:]: v for k, v in tensors.items() if k.startswith("ema.")})
    if optimizer is not None and "optimizer" in meta:
        optimizer.load_state_dict(
            _unflatten_optimizer({k: v for k, v in tensors.items() if k.startswith("optim.")}, meta["optimizer"])
        )
    _restore_schedule_and_rng(tensors, meta, scheduler)
    return meta


# ------------------------------------------------------------------------------------------ FSDP-sharded models
def _parameter_names(model, optimizer) -> list[str]:
    """The name of each of the optimiser's parameters, in the order optimizer.state_dict() numbers them."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def gather_full_state(model, optimizer=None) -> tuple[dict, dict | None]:
    """(weights, optimiser state) of an FSDP-sharded model as whole tensors on rank 0's CPU, to save; the optimiser
    state numbered like optimizer.state_dict(), so the file is the same as an unsharded run's. A collective: every
    process must call it; the others get empty dicts."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=options)
    if optimizer is None:
        return weights, None
    by_name = get_optimizer_state_dict(model, optimizer, options=options)  # keyed by parameter name
    if not by_name:
        return weights, {}
    state = {
        i: by_name["state"][name]
        for i, name in enumerate(_parameter_names(model, optimizer))
        if name in by_name["state"]
    }
    return weights, {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}


def _load_sharded(path, model, optimizer, scheduler, model_config) -> dict:
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict, set_optimizer_state_dict

    shapes, meta = read_checkpoint(path, tensors=False)  # every process checks the header: the same verdict on all
    _check_fits(path, meta, shapes, model, model_config)
    error = None
    if dist.get_rank() == 0:
        try:  # rank 0 alone reads the tensors and checks their checksum: every process learns the verdict
            tensors, _ = read_checkpoint(path)
        except CheckpointError as err:
            error = str(err)
    shared = [error]
    dist.broadcast_object_list(shared, src=0)
    if shared[0] is not None:
        raise CheckpointError(shared[0])
    if dist.get_rank() != 0:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            tensors = {k: f.get_tensor(k) for k in shapes if k.startswith("rng.")}
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, options=options)
    if optimizer is not None and "optimizer" in meta:
        state = {}
        if dist.get_rank() == 0:
            names = _parameter_names(model, optimizer)
            numbered = _unflatten_optimizer(
                {k: v for k, v in tensors.items() if k.startswith("optim.")}, meta["optimizer"]
            )
            state = {
                "state": {names[i]: s for i, s in numbered["state"].items()},
                "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in numbered["param_groups"]],
            }
        set_optimizer_state_dict(model, optimizer, state, options=options)
        for group, saved in zip(optimizer.param_groups, meta["optimizer"]["param_groups"]):
            group.update(
                {k: v for k, v in saved.items() if k != "params"}
            )  # lr & co. on every process, not only rank 0
    _restore_schedule_and_rng(tensors, meta, scheduler)
    return meta
