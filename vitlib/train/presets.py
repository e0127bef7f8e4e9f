"""Named training recipes (the paper's, DeiT's, self-supervised, time-to-accuracy): `TrainConfig` options that
explicit options override, each with where it comes from.

    python -m vitlib.train --preset paper-imagenet --dataset imagefolder:/data/imagenet      # Table 3's ImageNet row
    TrainConfig.from_preset("course-cpu", epochs=2)                                        # the same from Python
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    about: str  # one line: what it is for
    source: str  # where the numbers come from
    options: dict  # TrainConfig fields
    measured: str = "not measured yet: needs a GPU"  # what was measured with it, or what it waits for
    hardware: str = "GPU"


# ImageNet-1k has 1,281,167 training images: at batch 4096 an epoch is 313 steps; Table 3's 10k warm-up steps, 32 epochs
_IMAGENET_STEPS = 1_281_167 / 4096

# a table, one preset per entry: kept as written
# fmt: off
PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("paper-imagenet", "ViT-B/16 pre-trained on ImageNet-1k from scratch with the paper's recipe",
           "Table 3 (ImageNet row: 300 epochs, base lr 3e-3, weight decay 0.3, dropout 0.1, batch 4096) and "
           "appendix B.1 (Adam beta1 0.9 beta2 0.999, 10k warm-up steps, cosine decay (Table 3: cosine for the "
           "ImageNet rows, linear for ImageNet-21k and JFT), clipping at global norm 1, "
           "the MLP pre-training head, random crop and flip, 224 px)",
           dict(dataset="imagefolder:data/cache/imagenet", model="ViT-B/16", image_size=224, epochs=300,
                batch_size=4096, lr=3e-3, min_lr=1e-5, weight_decay=0.3, beta1=0.9, beta2=0.999,
                warmup_epochs=round(10_000 / _IMAGENET_STEPS, 1), schedule="cosine", grad_clip=1.0, dropout=0.1,
                head="mlp", augment="crop-flip", precision="bf16", compile=True, num_workers=16)),
    Preset("paper-imagenet21k", "ViT-B/16 pre-trained on ImageNet-21k (as a folder) with the paper's recipe",
           "Table 3 (ImageNet-21k row: 90 epochs, base lr 1e-3, weight decay 0.03, dropout 0.1, batch 4096) and "
           "appendix B.1; 10k warm-up steps are about 3 epochs of ImageNet-21k's ~14M images; no gradient "
           "clipping (Table 3's caption adds clipping at global norm 1 for ImageNet only)",
           dict(dataset="imagefolder:data/cache/imagenet21k", model="ViT-B/16", image_size=224, epochs=90,
                batch_size=4096, lr=1e-3, min_lr=1e-5, weight_decay=0.03, warmup_epochs=3.0, schedule="linear",
                grad_clip=0.0, dropout=0.1, head="mlp", augment="crop-flip", precision="bf16", compile=True,
                num_workers=16)),
    Preset("paper-finetune", "fine-tune a pre-trained ViT-B/16 on ImageNet at 384 px with the paper's recipe",
           "appendix B.1.1 and Table 4 (ImageNet row): SGD with momentum 0.9, batch 512, no weight decay, cosine "
           "decay, clipping at global norm 1, resolution 384, 20,000 steps (Table 4: 500 for Pets and Flowers, "
           "2,500 for VTAB, 10,000 for CIFAR), the rate picked from {0.003, 0.01, 0.03, 0.06} on a 1% held-out "
           "part of the training set; a new zero-initialised linear head, E_pos interpolated in 2D "
           "(vitlib.analysis.finetune); Table 2's models add Polyak averaging of the weights (--ema 0.9999); no "
           "warm-up is stated",
           dict(dataset="imagefolder:data/cache/imagenet", model="ViT-B/16", image_size=384, steps=20_000,
                batch_size=512, optimizer="sgd", momentum=0.9, lr=0.03, min_lr=0.0, weight_decay=0.0,
                warmup_epochs=0.0, schedule="cosine", grad_clip=1.0, head="linear", augment="crop-flip",
                val_fraction=0.01, precision="bf16", compile=True, num_workers=16)),
    Preset("deit", "the modern small-data recipe: RandAugment, mixup/cutmix, label smoothing, stochastic depth",
           "Touvron et al. 2021 (DeiT, Table 9): AdamW lr 5e-4 x batch/512, weight decay 0.05, 5 warm-up epochs, "
           "cosine, 300 epochs, label smoothing 0.1, RandAugment(9, 0.5), mixup 0.8, cutmix 1.0, drop path 0.1, "
           "no dropout; shown for ViT-S/16 at batch 1024",
           dict(dataset="imagefolder:data/cache/imagenet", model="ViT-S/16", image_size=224, epochs=300,
                batch_size=1024, lr=1e-3, min_lr=1e-5, weight_decay=0.05, warmup_epochs=5.0, schedule="cosine",
                grad_clip=1.0, label_smoothing=0.1, augment="randaugment", mixup=0.8, cutmix=1.0, drop_path=0.1,
                dropout=0.0, head="linear", precision="bf16", compile=True, num_workers=16)),
    Preset("mae", "self-supervised pre-training with a masked autoencoder (75% of the patches hidden)",
           "He et al. 2021 (MAE, Table 8): AdamW lr 1.5e-4 x batch/256, beta2 0.95, weight decay 0.05, 40 warm-up "
           "epochs, cosine, 800 epochs, random crop and flip, no label in sight; then fine-tune",
           dict(dataset="imagefolder:data/cache/imagenet", model="ViT-B/16", image_size=224, objective="mae",
                epochs=800, batch_size=4096, lr=2.4e-3, min_lr=0.0, weight_decay=0.05, beta2=0.95,
                warmup_epochs=40.0, schedule="cosine", grad_clip=0.0, augment="crop-flip", precision="bf16",
                compile=True, num_workers=16)),
    Preset("mpp", "self-supervised pre-training with the paper's masked patch prediction",
           "Section 4.6 and appendix B.1.2: 50% of the patches corrupted (80% [mask], 10% another patch, 10% kept), "
           "3-bit mean colour targets, Adam lr 2e-4, 10k warm-up steps, cosine decay, batch 4096",
           dict(dataset="imagefolder:data/cache/imagenet", model="ViT-B/16", image_size=224, objective="mpp",
                epochs=100, batch_size=4096, lr=2e-4, min_lr=0.0, weight_decay=0.0, warmup_epochs=32.0,
                schedule="cosine", grad_clip=1.0, augment="crop-flip", precision="bf16", compile=True,
                num_workers=16)),
    Preset("fmnist-5min", "time to accuracy: the full Fashion-MNIST on one GPU, goal >= 95.0% test accuracy in 5 min",
           "ours: ViT-Ti (12 blocks, width 192) on 4x4 patches (49 tokens + [class]), crop-flip, label smoothing, "
           "stochastic depth, an EMA of the weights; the whole set lives on the GPU as uint8 and is augmented there",
           dict(dataset="fashion-mnist", model="ViT-Ti/4", epochs=60, batch_size=512, lr=2e-3, min_lr=1e-5,
                weight_decay=0.05, warmup_epochs=3.0, schedule="cosine", grad_clip=1.0, label_smoothing=0.1,
                augment="crop-flip", drop_path=0.1, dropout=0.0, ema=0.999, val_fraction=0.0, precision="bf16",
                compile=True, log_every=100),
           measured="90.28% test accuracy after 60 epochs (3.68 min) on one H100, 2026-11-25: goal 95.0% not met "
                    "(results/gpu/tta_fmnist_5min.json)"),
    Preset("cifar10-15min", "time to accuracy: CIFAR-10 on one GPU, goal >= 94% test accuracy in 15 min",
           "ours, after the small-data ViT recipes (DeiT; Lee et al. 2021): ViT-S on 4x4 patches of 32x32 images "
           "(64 tokens), RandAugment, mixup/cutmix, label smoothing, stochastic depth, EMA",
           dict(dataset="cifar10", model="ViT-S/4", epochs=200, batch_size=512, lr=1e-3, min_lr=1e-5,
                weight_decay=0.05, warmup_epochs=5.0, schedule="cosine", grad_clip=1.0, label_smoothing=0.1,
                augment="randaugment", mixup=0.8, cutmix=1.0, drop_path=0.1, dropout=0.0, ema=0.9995,
                val_fraction=0.0, precision="bf16", compile=True, log_every=100),
           measured="not measured yet: needs a GPU (and CIFAR-10 on disk)"),
    Preset("tta-cpu", "time to accuracy on a 2-core CPU: the full Fashion-MNIST, goal >= 88% in 5 min",
           "ours (benchmarks/time_to_accuracy.py)",
           dict(dataset="fashion-mnist", model="ViT-Mini/7", epochs=5, batch_size=256, lr=2e-3, weight_decay=0.05,
                warmup_epochs=0.5, augment="none", label_smoothing=0.1, val_fraction=0.0, precision="fp32"),
           measured="88.47% test accuracy in 4.34 min on the 2-core CPU (results/tta_cpu.json)", hardware="CPU"),
    Preset("course-cpu", "the course's quick pre-training: a tiny ViT on the bundled data, in seconds on a CPU",
           "the paper's recipe (Adam(W), linear warm-up and decay, clipping at 1, the MLP head) at toy scale",
           dict(dataset="fashion-mnist-mini", model="ViT-Micro/4", epochs=3, batch_size=128, lr=2e-3, min_lr=1e-5,
                weight_decay=0.05, warmup_epochs=0.5, schedule="linear", grad_clip=1.0, head="mlp", augment="none",
                precision="fp32"),
           measured="see notebooks/16_pretraining.ipynb", hardware="CPU"),
]}
# fmt: on


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}: choose one of {', '.join(PRESETS)} "
            f"(python -m vitlib.train --list-presets describes them)."
        )
    return PRESETS[name]


def preset_options(name: str | None) -> dict:
    """The TrainConfig options of a preset (a copy); none for name None."""
    return dict(get_preset(name).options) if name else {}


def describe() -> str:
    """A readable listing of every preset with its options (for --list-presets)."""
    out = []
    for p in PRESETS.values():
        opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in p.options.items())
        out.append(f"{p.name} [{p.hardware}]: {p.about}\n  source: {p.source}\n  measured: {p.measured}\n  {opts}")
    return "\n\n".join(out)
