"""The shape of a ViT: patch size against sequence length and compute (section 3.1, Table 5, Table 6), and depth
against width at an equal number of parameters (Appendix D.2, Fig. 8).

    sequence_length(28, 7)                                   # N = HW / P^2 = 16 patches (+1 with the [class] token)
    deep, wide = depth_width_pair(dict(dim=48, depth=8, heads=4, mlp_ratio=2), shallow_depth=2,
                                  image_size=28, patch_size=7, in_channels=1, num_classes=10)
    parameter_count(**deep), parameter_count(**wide)       # within 2% of each other
    train_throughput(VisionTransformer(**deep), batch_size=64)   # images per second of forward + backward + AdamW

Section 3.1: "the Transformer's sequence length is inversely proportional to the square of the patch size, thus
models with smaller patch size are computationally more expensive". Appendix D.2 (Fig. 8) scales one dimension of a
ViT at a time and finds that "scaling the depth results in the biggest improvements" while "scaling the width of the
network seems to result in the smallest changes", and that "scaling should emphasize depth over width if any".
"""
from __future__ import annotations

import statistics

import torch
import torch.nn.functional as F
from torch import nn

from .bench import time_call
from .model import VisionTransformer
from .patches import check_patch_size


def sequence_length(image_size: int | tuple[int, int], patch_size: int, class_token: bool = False) -> int:
    """N = HW / P^2 patches (section 3.1), plus one when the [class] token is counted; a clear error when P does not
    divide the image."""
    gh, gw = check_patch_size(image_size, patch_size)
    return gh * gw + (1 if class_token else 0)


def parameter_count(**config) -> int:
    """Parameters of `VisionTransformer(**config)`, counted without allocating its weights (built on the meta device).

    Also accepts mlp_ratio=r instead of mlp_dim (mlp_dim = r * dim), as `width_config` returns."""
    config = _resolve_mlp(config)
    with torch.device("meta"):
        model = VisionTransformer(**config)
    return sum(p.numel() for p in model.parameters())


def _resolve_mlp(config: dict) -> dict:
    config = dict(config)
    ratio = config.pop("mlp_ratio", None)
    if ratio is not None:
        if "mlp_dim" in config:
            raise ValueError("give mlp_dim or mlp_ratio, not both.")
        config["mlp_dim"] = int(round(ratio * config["dim"]))
    return config


def width_for_parameters(target: int, depth: int, heads: int = 4, mlp_ratio: float = 2.0, max_dim: int = 4096,
                         **config) -> int:
    """The width D (a multiple of `heads`, MLP size mlp_ratio * D) whose ViT of `depth` layers has the parameter count
    closest to `target`; the other sizes (image_size, patch_size, ...) come from `config`."""
    if target < 1 or depth < 1 or heads < 1:
        raise ValueError(f"target, depth and heads must be positive, got target={target}, depth={depth}, heads={heads}.")
    best, best_gap = heads, None
    for dim in range(heads, max_dim + 1, heads):
        n = parameter_count(**config, dim=dim, depth=depth, heads=heads, mlp_ratio=mlp_ratio)
        if best_gap is None or abs(n - target) < best_gap:
            best, best_gap = dim, abs(n - target)
        if n >= target:  # the count grows with D: past the target nothing gets closer
            return best
    raise ValueError(f"no width up to max_dim={max_dim} reaches {target:,} parameters at depth {depth}: raise max_dim.")


def depth_width_pair(deep: dict, shallow_depth: int, tolerance: float = 0.05, **config) -> tuple[dict, dict]:
    """A deep-narrow and a shallow-wide ViT with (nearly) the same number of parameters (Appendix D.2, Fig. 8).

    `deep` gives the deep model's dim, depth, heads and mlp_ratio (or mlp_dim); the shallow model keeps its heads and
    MLP ratio and gets `shallow_depth` layers and the width that matches the deep model's parameter count. `config`
    holds what both share (image_size, patch_size, in_channels, num_classes, ...). Returns two configs for
    `VisionTransformer(**c)` (with mlp_dim, not mlp_ratio); raises when the counts differ by more than `tolerance`."""
    deep = dict(deep)
    if "dim" not in deep or "depth" not in deep:
        raise ValueError(f"`deep` needs at least dim and depth, got {sorted(deep)}.")
    if not 1 <= shallow_depth < deep["depth"]:
        raise ValueError(f"shallow_depth must be at least 1 and below the deep model's depth {deep['depth']}, "
                         f"got {shallow_depth}.")
    heads = deep.get("heads", 4)
    ratio = deep["mlp_dim"] / deep["dim"] if "mlp_dim" in deep else deep.get("mlp_ratio", 2.0)
    deep_cfg = _resolve_mlp({**config, **{k: v for k, v in deep.items() if k != "mlp_ratio"},
                             **({} if "mlp_dim" in deep else {"mlp_ratio": ratio}), "heads": heads})
    target = parameter_count(**deep_cfg)
    dim = width_for_parameters(target, shallow_depth, heads=heads, mlp_ratio=ratio, **config)
    wide_cfg = _resolve_mlp({**config, "dim": dim, "depth": shallow_depth, "heads": heads, "mlp_ratio": ratio})
    gap = abs(parameter_count(**wide_cfg) - target) / target
    if gap > tolerance:
        raise ValueError(f"the closest shallow-wide model differs by {gap:.1%} in parameters (> tolerance {tolerance:.0%}); "
                         f"change the sizes or raise tolerance.")
    return deep_cfg, wide_cfg


def train_throughput(model: nn.Module, batch_size: int = 64, steps: int = 5, repeats: int = 3,
                     threads: int | None = None, device: str | torch.device = "cpu", seed: int = 0,
                     image_size: int | tuple[int, int] | None = None, in_channels: int | None = None) -> float:
    """Measured training speed in images per second: forward, cross-entropy, backward and one AdamW step on random
    images of the model's size, `steps` steps per timing, the median of `repeats` timings after one untimed warm-up.

    Uses a copy of the model (its weights are not changed). A vitlib ViT knows its image size and channels; for another
    model (a CNN) pass image_size and in_channels. `threads` sets PyTorch's CPU threads while timing (restored
    afterwards). Timings depend on the machine and what else runs on it: compare them within one run only."""
    if batch_size < 1 or steps < 1 or repeats < 1:
        raise ValueError(f"batch_size, steps and repeats must be at least 1, got {batch_size}, {steps}, {repeats}.")
    import copy

    device = torch.device(device)
    net = copy.deepcopy(model).to(device).train()
    channels = in_channels or getattr(net, "in_channels", None)
    size = image_size or getattr(net, "image_size", None)
    if channels is None or size is None:
        raise ValueError(f"{type(model).__name__} does not say what images it takes: pass image_size= and in_channels=.")
    h, w = (size, size) if isinstance(size, int) else tuple(size)
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, channels, h, w, generator=g).to(device)
    with torch.no_grad():
        num_classes = net(images[:1]).shape[-1]
    labels = torch.randint(0, num_classes, (batch_size,), generator=g).to(device)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)

    def run() -> None:
        for _ in range(steps):
            loss = F.cross_entropy(net(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        seconds = time_call(run, repeats=repeats, warmup=1)  # the warm-up: allocations, AdamW's state
    finally:
        torch.set_num_threads(before)
    return batch_size * steps / seconds


def logged_throughput(steps: list[dict]) -> float:
    """The median of the `images_per_s` that `vitlib.train.train` logged (result.steps), over the log intervals."""
    values = [row["images_per_s"] for row in steps if row.get("images_per_s")]
    if not values:
        raise ValueError("no images_per_s in these rows: pass result.steps of a vitlib.train.train run.")
    return statistics.median(values)
