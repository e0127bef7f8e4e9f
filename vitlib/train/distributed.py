"""Several processes (torchrun): the process group and each process's device, DDP or FSDP2 around the model, and the
few collectives a run needs."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
from torch import nn

from ..model import EncoderBlock


def resolve_device(device: str) -> torch.device:
    """The device of a device option: 'auto' is a GPU when there is one, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was asked for but no CUDA GPU is available: use device='cpu'.")
    return torch.device(device)


def setup(device: str = "auto") -> tuple[int, int, torch.device]:
    """(rank, world size, device); under torchrun, the process group (NCCL or gloo) and the local rank's GPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world, local_rank = 0, 1, 0
    if dist.is_initialized():
        rank, world, local_rank = dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0"))
    resolved = resolve_device(device)
    if resolved.type == "cuda" and world > 1:
        resolved = torch.device("cuda", local_rank)
        torch.cuda.set_device(resolved)
    return rank, world, resolved


def shard_model(model: nn.Module, device: torch.device, world: int) -> nn.Module:
    """FSDP2 in place: each EncoderBlock (the ViT's, an MAE decoder's) one unit, the root the rest; world 1: as is."""
    blocks = [m for m in model.modules() if isinstance(m, EncoderBlock)]
    if not blocks:
        raise ValueError(
            f"fsdp shards a ViT's encoder blocks, and {type(model).__name__} has none: drop fsdp "
            f"(several processes then use DDP)."
        )
    strided = [name for name, p in model.named_parameters() if not p.is_contiguous()]
    if strided:
        raise ValueError(
            f"FSDP cannot shard non-contiguous weights ({', '.join(strided[:3])}, ...): channels_last "
            f"turns a hybrid's CNN filters channels-last. Drop channels_last or fsdp."
        )
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (world,))
        for block in blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model


def all_finite(model: nn.Module, sharded: bool) -> bool:
    """Whether every weight is finite; sharded: each process checks its shards, then they agree (a collective)."""
    if not sharded:
        return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())
    model.reshard()  # the root's weights stay gathered after a forward without backward (an evaluation)
    finite = torch.stack([torch.isfinite(p.to_local()).all() for p in model.parameters()]).all().int()
    dist.all_reduce(finite, op=dist.ReduceOp.MIN)
    return bool(finite)


def sync_buffers(model: nn.Module) -> None:
    """Rank 0's buffers (a hybrid's BatchNorm statistics, which FSDP does not shard) on every process, as under DDP."""
    for buffer in model.buffers():
        dist.broadcast(buffer, 0)


def past(started: float, minutes: float, device: torch.device) -> bool:
    """Whether the time budget is spent; under DDP rank 0's clock decides for all, so they stop at the same step."""
    over = time.perf_counter() - started > minutes * 60
    if dist.is_initialized():
        flag = torch.tensor([float(over)], device=device)
        dist.broadcast(flag, 0)
        over = bool(flag.item())
    return over


def any_flag(flag: bool, device: torch.device, sync: bool) -> bool:
    """Whether any process has `flag` set; under DDP only when `sync` (at log steps: no extra sync per step)."""
    if not dist.is_initialized():
        return flag
    if not sync:
        return False
    shared = torch.tensor([float(flag)], device=device)
    dist.all_reduce(shared, op=dist.ReduceOp.MAX)
    return bool(shared.item())


def rank0_error(error: str | None) -> str | None:
    """Rank 0's error message (or None) on every process (a collective): all processes stop together."""
    shared = [error]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]
