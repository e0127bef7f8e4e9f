"""DINO in miniature (Caron et al. 2021; beyond the ViT paper): pre-train a ViT by self-distillation on a data set's
training images without their labels, then ask where its [class] token looks.

    dino, history = pretrain_dino(vit, data, TrainConfig(steps=100, weight_decay=0.04, grad_clip=3.0))  # per step
    cfg = TrainConfig(steps=4000, schedule="plateau", patience=3, lr_drops=1, weight_decay=0.04, grad_clip=3.0)
    dino, history = pretrain_dino(vit, data, cfg, monitor=knn_monitor(data))  # until val k-NN stops improving
    dino.stopping  # {'stopped': 'plateau' or 'budget', 'steps', 'best_step', 'best_score'}
    share = foreground_share(weights[-1], raw_images, patch_size)  # [class] attention on the object, per image

Why its own training function, not `vitlib.train.train`: one DINO step is more than `objective.loss` + AdamW. Every
image is seen as several augmented views drawn per image (the loop's loaders draw one view per batch), and after
every optimizer step the teacher follows the student with a momentum that rises along a cosine schedule (the loop's
`EMA` has one fixed decay) while the centre follows the teacher's outputs. Both are state of the objective itself;
the recipe is a `TrainConfig`, the optimiser and its schedule are the loop's (`param_groups`, `lr_lambda`)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from vitlib.analysis.attention import class_attention
from vitlib.analysis.probe import extract_features, knn_accuracy
from vitlib.data import Dataset, TensorSplit, random_resized_crop_flip
from vitlib.model import VisionTransformer
from vitlib.objectives.dino import DINO, teacher_momentum
from vitlib.train import TrainConfig, lr_lambda, param_groups, plateau_stop, resolve_device, vectorized


def jitter(x: torch.Tensor, generator: torch.Generator, p: float = 0.8, strength: float = 0.4) -> torch.Tensor:
    """Per-image brightness then contrast jitter (factors drawn in [1 - strength, 1 + strength]; contrast about the
    image's mean, as transforms v2's ColorJitter for a grey image), applied to each image with probability p;
    images in [0, 1], vectorised."""
    u = torch.rand(x.shape[0], 3, generator=generator, device=generator.device).to(x.device).view(-1, 3, 1, 1, 1)
    y = (x * (1 - strength + 2 * strength * u[:, 1])).clamp(0, 1)
    m = y.mean(dim=(1, 2, 3), keepdim=True)
    y = ((y - m) * (1 - strength + 2 * strength * u[:, 2]) + m).clamp(0, 1)
    return torch.where(u[:, 0] < p, y, x)


def blur(
    x: torch.Tensor, generator: torch.Generator, p: float = 0.5, sigma: tuple[float, float] = (0.1, 1.0)
) -> torch.Tensor:
    """Per-image 3x3 Gaussian blur (sigma drawn in `sigma`, reflected borders), applied to each image with
    probability p; vectorised as one grouped convolution."""
    b, c, h, w = x.shape
    u = torch.rand(b, 2, generator=generator, device=generator.device).to(x.device)
    s = sigma[0] + (sigma[1] - sigma[0]) * u[:, 1:]
    k = torch.exp(-(torch.tensor([-1.0, 0.0, 1.0], device=x.device) ** 2) / (2 * s**2))
    k = k / k.sum(1, keepdim=True)  # (b, 3): a normalised 1D kernel per image
    weight = (k[:, :, None] * k[:, None, :]).repeat_interleave(c, 0).unsqueeze(1)  # (b * c, 1, 3, 3)
    y = F.conv2d(F.pad(x.reshape(1, b * c, h, w), (1, 1, 1, 1), mode="reflect"), weight, groups=b * c)
    return torch.where(u[:, 0].view(-1, 1, 1, 1) < p, y.reshape(b, c, h, w), x)


def dino_view(
    x: torch.Tensor, generator: torch.Generator, scale: tuple[float, float] = (0.35, 1.0), blur_p: float = 0.5
) -> torch.Tensor:
    """One view of each image of a batch in [0, 1] (B, C, H, W): DINO's global-crop recipe, scaled down to the
    images' size (random resized crop at the full size, flip, brightness/contrast jitter, Gaussian blur; no colour:
    the images are grey), every draw per image, vectorised (`random_resized_crop_flip`, `jitter`, `blur`)."""
    x = random_resized_crop_flip(x, generator, scale=scale, ratio=(3 / 4, 4 / 3)).clamp(0, 1)
    return blur(jitter(x, generator), generator, p=blur_p)


def make_views(
    images: torch.Tensor, n_global: int = 2, n_local: int = 0, mean=(0.5,), std=(0.5,), generator=None
) -> list:
    """`n_global` global views (crops of 35-100 % of the image; the first blurred always, the second rarely, as in
    DINO) and `n_local` local views (crops of 10-35 %, resized to the same size, blurred half the time), each
    (B, C, H, W) and normalised; the draws come from `generator` (default: torch's global one)."""
    g = torch.default_generator if generator is None else generator
    x = images.float() / 255 if images.dtype == torch.uint8 else images.float()
    recipes = [((0.35, 1.0), 1.0 if i == 0 else 0.1) for i in range(n_global)]
    recipes += [((0.1, 0.35), 0.5)] * n_local
    m, s = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
    return [(dino_view(x, g, scale, p) - m) / s for scale, p in recipes]


def batches(images: torch.Tensor, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Batches of `images` without end, step s from offset s * batch_size (mod the set's size) of a seeded random
    order, drawn anew (and started at 0) where a batch would run past the end."""
    g = torch.Generator().manual_seed(seed)
    order, step = torch.randperm(len(images), generator=g), 0
    while True:
        at = (step * batch_size) % len(images)
        if at + batch_size > len(images):
            order, at = torch.randperm(len(images), generator=g), 0
        yield images[order[at : at + batch_size]]
        step += 1


def entropies(logits: torch.Tensor, centre: torch.Tensor, tau: float) -> tuple[float, float]:
    """(entropy of the batch-mean distribution, mean per-image entropy), in nats, of softmax((logits - c) / tau):
    both near 0 = every image on one prototype; both near log K = uniform outputs; healthy: the first high, the
    second low."""
    p = F.softmax((logits.float() - centre) / tau, dim=-1)
    mean_p = p.mean(0)
    h_mean = -(mean_p * mean_p.clamp_min(1e-12).log()).sum().item()
    h_each = -(p * p.clamp_min(1e-12).log()).sum(-1).mean().item()
    return h_mean, h_each


def dino_step(dino: DINO, views: list[torch.Tensor], optimizer, scheduler, grad_clip: float, momentum: float):
    """One DINO step: the student's loss on the views, an optimizer step (clipped at grad_clip when > 0), then the
    teacher follows the student with this step's momentum. Returns the loss and the teacher's outputs."""
    loss, teacher = dino(views)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip > 0:
        nn.utils.clip_grad_norm_(dino.student_parameters(), grad_clip)
    optimizer.step()
    scheduler.step()
    dino.update_teacher(momentum)
    return loss, teacher


def dino_budget(cfg: TrainConfig, n_images: int, monitored: bool, evaluations: int) -> tuple[int, int]:
    """cfg's steps and warm-up steps for a DINO run on n_images, after checking that a monitored run's patience and
    number of evaluations can be run (cfg itself was checked when it was made)."""
    if monitored and (cfg.patience < 1 or evaluations < 1):
        raise ValueError(
            f"a monitored DINO run stops after cfg.patience evaluations without progress: set patience >= 1 and "
            f"evaluations >= 1 (got {cfg.patience} and {evaluations})."
        )
    per_epoch = n_images // cfg.batch_size
    if per_epoch == 0:
        raise ValueError(f"the training set ({n_images} images) is smaller than one batch ({cfg.batch_size}).")
    return cfg.steps or cfg.epochs * per_epoch, max(1, round(cfg.warmup_epochs * per_epoch))


def pretrain_dino(
    vit: VisionTransformer,
    data: Dataset,
    cfg: TrainConfig,
    *,
    momentum: float = 0.996,
    n_local: int = 0,
    monitor: Callable[[VisionTransformer], float] | None = None,
    evaluations: int = 40,
    **dino_options,
) -> tuple[DINO, list[dict]]:
    """Train DINO(vit) on batches of data.train's images (labels never read) with cfg's recipe, as `vitlib.train`
    reads it: cfg.steps AdamW steps (0: cfg.epochs passes over the images), batch_size, lr, beta1, beta2,
    weight_decay, warmup_epochs, schedule, min_lr, grad_clip, seed and device (DINO's own views are its augmentation,
    in full precision: cfg's augment, mixup, cutmix, label smoothing, EMA and precision play no part). DINO's paper
    uses weight_decay=0.04 and grad_clip=3. Its own options: the teacher's starting `momentum` (rising to 1), `n_local`
    local views per image, and DINO's (`prototypes`, `centring`, `tau_t`, ...). Returns the model (on the CPU, in eval
    mode) and one row per step: loss, teacher momentum, the teacher's two entropies.

    With `monitor` (the teacher backbone -> a validation score, higher better; `knn_monitor`), cfg.steps is a budget:
    the teacher is scored about `evaluations` times over it, and the run stops by the course's rule (`plateau_stop`:
    cfg.patience evaluations without a better score, after cfg.lr_drops tenfold drops of the rate under cfg.schedule
    'plateau'), keeping the weights of the best score (rows of those steps carry 'monitor'). The teacher's momentum
    still rises along a cosine over the whole budget. `dino.stopping` says how the run ended: 'stopped' ('plateau',
    or 'budget' when the budget ran out first or there was no monitor), 'steps' taken, 'best_step', 'best_score'."""
    images, device = data.train.images, resolve_device(cfg.device)
    steps, warmup = dino_budget(cfg, len(images), monitored=monitor is not None, evaluations=evaluations)
    torch.manual_seed(cfg.seed)
    dino = DINO(vit, **dino_options).to(device).train()
    groups = param_groups(nn.ModuleList([dino.student, dino.student_head]), cfg.weight_decay)
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **vectorized(device))  # as train()'s
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg, steps, warmup))
    history, start = [], time.perf_counter()
    every, best, stopped = max(1, steps // evaluations), {}, "budget"
    for step, batch in zip(range(steps), batches(images, cfg.batch_size, cfg.seed)):
        views = make_views(batch, dino.n_global, n_local, data.mean, data.std)
        m = teacher_momentum(step, steps, momentum)
        loss, teacher = dino_step(dino, [v.to(device) for v in views], optimizer, scheduler, cfg.grad_clip, m)
        h_mean, h_each = entropies(torch.cat(teacher), dino.centre, dino.tau_t)
        elapsed = time.perf_counter() - start
        history.append(dict(step=step + 1, loss=loss.item(), momentum=m, h_mean=h_mean, h_each=h_each, time_s=elapsed))
        if monitor is not None and ((step + 1) % every == 0 or step + 1 == steps):
            history[-1]["monitor"] = score = float(monitor(dino.teacher))
            dino.train()
            if not best or score > best["score"]:
                best.update(score=score, epoch=step + 1, weights=copy.deepcopy(dino.state_dict()))
            if plateau_stop(best, step + 1, cfg.patience * every, cfg, optimizer, scheduler):
                stopped = "plateau"
                break
    if best:
        dino.load_state_dict(best["weights"])
    dino.stopping = dict(
        stopped=stopped, steps=len(history), best_step=best.get("epoch", len(history)), best_score=best.get("score")
    )
    return dino.cpu().eval(), history


def knn_monitor(
    data: Dataset, memory: TensorSplit | None = None, k: int = 20, temperature: float = 0.07
) -> Callable[[nn.Module], float]:
    """A `pretrain_dino` monitor: the weighted k-NN accuracy of a backbone's features on data.val, with `memory`'s
    images and labels as the neighbours (default: data.train), on the device the backbone is on -- the validation
    score DINO's runs stop on and choose their rate by."""
    if data.val is None:
        raise ValueError("knn_monitor scores on the validation split, and this data set has none (val_fraction=0).")
    memory = data.train if memory is None else memory

    def score(net: nn.Module) -> float:
        device = next(net.parameters()).device
        train_f, train_y = extract_features(net, memory, data, device=device)
        val_f, val_y = extract_features(net, data.val, data, device=device)
        return knn_accuracy(train_f, train_y, val_f, val_y, k=k, temperature=temperature)

    return score


def collapse_runs(vit_fn, data: Dataset, settings: dict[str, dict], cfg: TrainConfig, **options) -> dict[str, list]:
    """pretrain_dino(vit_fn(), data, cfg, **options) once per named setting of DINO's options (e.g.
    {'centring + sharpening': {}, 'no centring': dict(centring=False)}), each from the same initial ViT, and the
    per-step history of each."""
    return {name: pretrain_dino(vit_fn(), data, cfg, **{**options, **opts})[1] for name, opts in settings.items()}


# ------------------------------------------------------------------------------------------- where [class] looks
def cls_attention(weights: torch.Tensor, prefix: int = 1, head: str = "mean") -> torch.Tensor:
    """The [class] token's attention on the patches in one layer's weights (B, heads, L, L): (B, N), heads fused by
    their mean (or, head='each', kept: (B, heads, N)), each row renormalised over the patches (`class_attention`)."""
    a = class_attention(weights.double(), prefix, renormalise=True)
    return (a.mean(1) if head == "mean" else a).float()


def foreground_patches(raw: torch.Tensor, patch_size: int, threshold: float = 0.2) -> torch.Tensor:
    """(B, N) bool: the patches whose mean pixel intensity (images in [0, 1], or uint8) is above `threshold`."""
    x = raw.float() / 255 if raw.dtype == torch.uint8 else raw.float()
    pooled = nn.functional.avg_pool2d(x.mean(1, keepdim=True), patch_size)  # (B, 1, gh, gw)
    return (pooled > threshold).flatten(1)


def foreground_share(
    weights: torch.Tensor, raw: torch.Tensor, patch_size: int, threshold: float = 0.2, head: str = "mean"
) -> torch.Tensor:
    """Per image, the share of the [class] token's attention on the patches (last layer: pass weights[-1]) that
    falls on foreground patches; head='best': the head with the largest share, per image. (B,) in [0, 1]."""
    fg = foreground_patches(raw, patch_size, threshold)
    if head == "mean":
        return (cls_attention(weights) * fg).sum(-1)
    if head == "best":
        return (cls_attention(weights, head="each") * fg[:, None]).sum(-1).amax(1)
    raise ValueError(f"head must be 'mean' or 'best', got {head!r}.")


def plot_cls_maps(raw: torch.Tensor, maps: dict[str, torch.Tensor], grid: tuple[int, int], n: int = 6, outline=None):
    """Rows: the images, then each model's [class] attention (B, N) on the patch grid (share of the attention, one
    colour scale per row with its colour bar); columns: images. `outline` (B, N) bool: the foreground patches,
    a cyan dot on each of them on every map."""
    fig, axes = plt.subplots(len(maps) + 1, n, figsize=(1.45 * n + 1.2, 1.45 * (len(maps) + 1)), layout="constrained")
    for j in range(n):
        axes[0, j].imshow(raw[j, 0], cmap="gray")
        axes[0, j].set_title(f"test image {j + 1}", fontsize=8)
    axes[0, 0].set_ylabel("input", fontsize=8)
    for i, (name, m) in enumerate(maps.items(), start=1):
        top = float(m[:n].max())
        for j in range(n):
            im = axes[i, j].imshow(m[j].reshape(grid), cmap="inferno", vmin=0, vmax=top)
            if outline is not None:
                rows, cols = torch.nonzero(outline[j].reshape(grid), as_tuple=True)
                axes[i, j].scatter(cols, rows, s=6, c="cyan")
        axes[i, 0].set_ylabel(name, fontsize=8)
        fig.colorbar(im, ax=axes[i, :].tolist(), shrink=0.9, label="share of the\n[class] attention")
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    return fig
