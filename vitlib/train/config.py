"""The options of a run: `TrainConfig`, each field an option of `python -m vitlib.train` with its help text, checked
once when it is made (frozen: another run's options are dataclasses.replace(cfg, ...))."""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field

from ..data import AUGMENTATIONS
from ..model import is_cnn_name
from ..objectives import OBJECTIVES
from .presets import preset_options

CHOICES = {  # the options that name one of a few choices
    "schedule": ("cosine", "linear", "constant", "plateau"),
    "precision": ("auto", "fp32", "bf16", "fp16"),
    "augment": AUGMENTATIONS,
    "head": ("linear", "mlp"),
    "objective": OBJECTIVES,
    "optimizer": ("adamw", "sgd"),
}


def option(default, help: str):
    """A TrainConfig field: its default and its help text (`python -m vitlib.train --help` shows both)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class TrainConfig:
    """Every option of a run, with its help text; `python -m vitlib.train --help` lists them with these defaults."""

    dataset: str = option("fashion-mnist-mini", "data set name (vitlib.data.dataset_names()) or imagefolder:<path>")
    model: str = option("ViT-Micro/4", "a ViT ('ViT-B/16', 'R50+ViT-B/16') or a CNN ('ResNet-8', 'resnet18')")
    objective: str = option(
        "classify", "classify, mae, mpp (section 4.6: no labels) or token (train(model=TokenLabelling(vit, teacher)))"
    )
    out: str | None = option(None, "output folder for metrics and checkpoints (none: keep nothing on disk)")
    epochs: int = option(10, "passes over the training set")
    steps: int = option(0, "train for exactly this many optimizer steps (0: epochs decide)")
    batch_size: int = option(128, "global batch size (split across processes)")
    lr: float = option(1e-3, "peak learning rate")
    min_lr: float = option(1e-5, "learning rate at the end of the decay")
    optimizer: str = option("adamw", "adamw (pre-training, App. B.1) or sgd with momentum (fine-tuning, App. B.1.1)")
    momentum: float = option(0.9, "SGD momentum (optimizer sgd)")
    weight_decay: float = option(0.05, "weight decay (not applied to biases, norms, E_pos and the [class] token)")
    beta1: float = option(0.9, "Adam beta1")
    beta2: float = option(0.999, "Adam beta2")
    warmup_epochs: float = option(1.0, "linear warm-up length in epochs (may be fractional)")
    schedule: str = option("cosine", "after warm-up: cosine, linear, constant or plateau (tenfold lower on a stall)")
    lr_drops: int = option(2, "with schedule plateau: how many tenfold drops of the rate before a stall ends the run")
    grad_clip: float = option(1.0, "clip the global gradient norm (0: off)")
    label_smoothing: float = option(0.0, "label smoothing of the cross-entropy")
    augment: str = option("none", f"augmentation preset: {', '.join(AUGMENTATIONS)}")
    mixup: float = option(0.0, "mixup alpha (0: off)")
    cutmix: float = option(0.0, "cutmix alpha (0: off); with both, one of the two per batch")
    ema: float = option(0.0, "decay of an EMA of the weights, evaluated instead of the weights (0: off)")
    precision: str = option("auto", "fp32, bf16, fp16 or auto (bf16 on a GPU that has it, else fp32)")
    compile: bool = option(False, "torch.compile the model")
    device: str = option("auto", "cpu, cuda, cuda:N or auto")
    seed: int = option(0, "fixes init, data order and augmentation")
    subset: float | None = option(None, "keep a stratified part of the training set: a fraction <= 1 or a count")
    val_fraction: float = option(0.1, "stratified fraction of the training set held out for validation")
    image_size: int | None = option(None, "resize images to this side (default: the data set's own)")
    data_root: str | None = option(None, "where data sets are (default $VITLIB_DATA_DIR, else data/cache)")
    download: bool = option(False, "download the data set if it is missing (needs internet)")
    num_workers: int = option(4, "DataLoader workers for folders of images")
    pos_embed: str | None = option(None, "position embedding: learned, none, learned2d, sincos2d, relative")
    pool: str | None = option(None, "cls or gap")
    dropout: float | None = option(None, "dropout rate in the encoder")
    drop_path: float | None = option(None, "stochastic depth rate (deepest block)")
    head: str = option("linear", "linear (zero-initialised, section 3.2) or mlp (one tanh hidden layer, pre-training)")
    fused_attention: bool = option(True, "F.scaled_dot_product_attention (off: the written-out softmax)")
    channels_last: bool = option(False, "feed the images (and the patch embedding) in channels-last memory format")
    fsdp: bool = option(False, "under torchrun, shard weights, gradients and AdamW state with FSDP2 (not DDP)")
    checkpoint_every: int = option(0, "also checkpoint every N steps (0: at epoch ends only)")
    resume: bool = option(False, "continue from out/checkpoint.safetensors")
    overwrite: bool = option(False, "start afresh in an out folder holding another run's results (removes them)")
    time_budget: float = option(0.0, "stop cleanly after this many minutes and save (0: no limit)")
    log_every: int = option(20, "steps between progress updates")
    eval_every: int = option(1, "evaluate (validation, else test split) every N epochs and after the last (0: never)")
    patience: int = option(0, "early stopping after this many evaluations without a better val score (0: off)")
    eval_test: bool = option(True, "evaluate on the test set at the end")
    progress: bool = option(True, "show tqdm progress bars")
    allow_change: str = option("", "with resume: what may differ from the checkpoint's run (epochs,steps,precision)")

    def __post_init__(self):
        check_config(self)  # each option in its range and how they combine, as on the command line

    @classmethod
    def from_preset(cls, name: str | None, **overrides) -> TrainConfig:
        """A named recipe of vitlib.train.presets ('paper-imagenet', 'deit', ...); keyword options win."""
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"unknown TrainConfig option(s) {unknown}: see python -m vitlib.train --help.")
        return cls(**{**preset_options(name), **overrides})


# may differ between a run and its resumption: where and how it runs, not what it computes
SESSION_OPTIONS = tuple(
    "out resume overwrite allow_change device num_workers download data_root progress log_every checkpoint_every "
    "time_budget eval_every eval_test patience compile fused_attention channels_last fsdp".split()
)
# may differ on resume when named in allow_change (e.g. --allow-change epochs): everything else is the run itself
CHANGEABLE_OPTIONS = ("epochs", "steps", "precision")

# name: (low, high, low inclusive, high inclusive, what to write instead) of every numeric option; None: no bound
RANGES = {
    "epochs": (1, None, True, True, "at least 1"),
    "steps": (0, None, True, True, "0 (epochs decide) or a number of optimizer steps"),
    "batch_size": (1, None, True, True, "at least 1"),
    "lr": (0, None, False, True, "positive"),
    "min_lr": (0, None, True, True, "0 or more (and at most lr)"),
    "weight_decay": (0, None, True, True, "0 (off) or more"),
    **dict.fromkeys(("beta1", "momentum", "beta2"), (0, 1, True, False, "in [0, 1)")),
    "warmup_epochs": (0, None, True, True, "0 (no warm-up) or more"),
    "grad_clip": (0, None, True, True, "0 (off) or a positive norm"),
    "label_smoothing": (0, 1, True, False, "in [0, 1)"),
    **dict.fromkeys(("mixup", "cutmix"), (0, None, True, True, "0 (off) or a positive alpha")),
    "ema": (0, 1, True, False, "0 (off) or a decay in (0, 1)"),
    "seed": (0, 2**24 - 1, True, True, "in [0, 16777215] (2^24 - 1: the per-step seeds are derived from it)"),
    "subset": (0, None, False, True, "a fraction in (0, 1] or a whole number of images (or none: all)"),
    "val_fraction": (0, 1, True, False, "in [0, 1) (0: no validation split)"),
    "image_size": (1, None, True, True, "a positive number of pixels (or none: the data set's own)"),
    "num_workers": (0, None, True, True, "0 (load in the main process) or more"),
    **dict.fromkeys(("dropout", "drop_path"), (0, 1, True, False, "in [0, 1) (or none: the model's default)")),
    "checkpoint_every": (0, None, True, True, "0 (epoch ends only) or a number of steps"),
    "time_budget": (0, None, True, True, "0 (no limit) or a number of minutes"),
    "log_every": (1, None, True, True, "at least 1 (steps between progress updates)"),
    "eval_every": (0, None, True, True, "0 (never during the run) or a number of epochs"),
    "patience": (0, None, True, True, "0 (off) or a number of evaluations"),
    "lr_drops": (0, None, True, True, "0 (stop at the first stall) or a number of tenfold drops"),
}


def _check_number(cfg: TrainConfig, name: str) -> None:
    value, kind = getattr(cfg, name), TrainConfig.__dataclass_fields__[name].type  # kind: e.g. 'float | None'
    low, high, low_in, high_in, allowed = RANGES[name]
    if value is None and "None" in kind:
        return
    whole, flag = "int" in kind, "--" + name.replace("_", "-")
    ok_type = isinstance(value, numbers.Integral if whole else numbers.Real)  # numpy's numbers too
    if not ok_type or isinstance(value, bool) or value != value or value in (float("inf"), float("-inf")):
        number = "a whole number" if whole else "a number"
        raise ValueError(f"{name} must be {number}, {allowed}; got {value!r} ({flag}).")
    too_low = low is not None and (value < low if low_in else value <= low)
    too_high = high is not None and (value > high if high_in else value >= high)
    if too_low or too_high:
        raise ValueError(f"{name} must be {allowed}, got {value!r} ({flag}).")


def allowed_changes(cfg: TrainConfig) -> list[str]:
    """The option names of cfg.allow_change ('epochs,steps', or a list), with - or _ alike."""
    names = cfg.allow_change.split(",") if isinstance(cfg.allow_change, str) else list(cfg.allow_change or ())
    return [n.strip().lstrip("-").replace("-", "_") for n in names if n.strip()]


def resume_differences(saved: dict, cfg: TrainConfig) -> tuple[dict, dict]:
    """(refused, allowed): {name: (saved, now)} of the options, but SESSION_OPTIONS, that differ from `saved`."""
    now = dataclasses.asdict(cfg)
    diff = {k: (saved[k], v) for k, v in now.items() if k in saved and k not in SESSION_OPTIONS and saved[k] != v}
    allowed = set(allowed_changes(cfg))
    return {k: d for k, d in diff.items() if k not in allowed}, {k: d for k, d in diff.items() if k in allowed}


def check_fields(cfg: TrainConfig) -> None:
    """Raise a ValueError that names the option and its range when one option alone is wrong."""
    for name, allowed in CHOICES.items():
        if getattr(cfg, name) not in allowed:
            raise ValueError(f"unknown {name} {getattr(cfg, name)!r}: choose one of {', '.join(allowed)}.")
    for name in RANGES:
        _check_number(cfg, name)
    if cfg.subset is not None and cfg.subset > 1 and cfg.subset != int(cfg.subset):
        raise ValueError(
            f"subset ({cfg.subset}) must be a fraction in (0, 1] or a whole number of images, got {cfg.subset!r}."
        )
    for name in ("dataset", "model", "device"):
        if not isinstance(getattr(cfg, name), str) or not getattr(cfg, name):
            raise ValueError(f"{name} must be a non-empty name, got {getattr(cfg, name)!r}.")
    if cfg.out is not None and not str(cfg.out).strip():
        raise ValueError("out must be a folder (or none: keep nothing on disk), got an empty name.")
    unknown = sorted(set(allowed_changes(cfg)) - set(CHANGEABLE_OPTIONS) - set(SESSION_OPTIONS))
    if unknown:
        what = [n for n in unknown if n not in TrainConfig.__dataclass_fields__]
        raise ValueError(
            f"allow_change names {', '.join(unknown)}: "
            + (f"{', '.join(what)} is not an option; " if what else "")
            + f"only {', '.join(CHANGEABLE_OPTIONS)} may change on resume (the other options of a run are the run "
            f"itself: start a new run in another out folder to change them)."
        )


def check_config(cfg: TrainConfig) -> None:
    """Raise a ValueError that names the option when one is out of its range or the options do not fit together."""
    check_fields(cfg)
    if cfg.min_lr > cfg.lr:
        raise ValueError(
            f"min_lr ({cfg.min_lr}) is above lr ({cfg.lr}): the schedule would rise instead of decay. "
            f"Set --min-lr to at most lr (e.g. --min-lr 0)."
        )
    if allowed_changes(cfg) and not cfg.resume:
        raise ValueError("allow_change only applies with resume (it names what may differ from the checkpoint).")
    if cfg.patience and (cfg.resume or cfg.fsdp or cfg.eval_every == 0):
        why = "the best weights so far are kept in memory only" if cfg.eval_every else "eval_every=0 never evaluates"
        raise ValueError(
            f"patience (early stopping) cannot be combined with resume, fsdp or eval_every=0 ({why}): drop one of them."
        )
    if cfg.schedule == "plateau" and not cfg.patience:
        raise ValueError(
            "schedule='plateau' lowers the rate when the validation accuracy stalls for `patience` evaluations: "
            "set patience (e.g. --patience 3), or choose another schedule."
        )
    if cfg.resume and not cfg.out:
        raise ValueError("resume needs out= (the folder with checkpoint.safetensors).")
    labels = [k for k in ("mixup", "cutmix", "label_smoothing") if getattr(cfg, k)]
    unset = " and ".join(f"{k}=0" for k in labels)
    if labels and cfg.objective == "token":
        raise ValueError(
            f"objective='token' takes soft targets per token from its teacher, so {', '.join(labels)} would mix or "
            f"smooth only the [class] label (LV-ViT's MixToken is not implemented): set {unset}."
        )
    if labels and cfg.objective != "classify":
        raise ValueError(
            f"objective={cfg.objective!r} never looks at a label, so {', '.join(labels)} has nothing to act on: "
            f"set {unset}."
        )
    if cfg.objective != "classify" and is_cnn_name(cfg.model):
        raise ValueError(f"objective={cfg.objective!r} pre-trains a ViT; {cfg.model!r} is a CNN.")
    # fsdp is refused in one process too: a one-process trial finds out before a long multi-GPU run
    if cfg.fsdp and is_cnn_name(cfg.model):
        raise ValueError(f"fsdp shards a ViT's blocks; {cfg.model!r} is a CNN, small enough for DDP: drop fsdp.")
    if cfg.fsdp and cfg.ema > 0:
        raise ValueError(
            "fsdp with ema is not supported: the EMA would be a whole, unsharded copy of the weights on every "
            "process, which is what fsdp avoids. Set ema=0 or drop fsdp."
        )
