"""Training-step throughput of vitlib against timm's VisionTransformer at the same architecture and the same weights.

    python benchmarks/throughput.py                              # CPU-sized default: ViT-Ti/4 cut to 6 blocks, 32x32
    python benchmarks/throughput.py --model ViT-B/16 --depth 0 --image-size 224 --batch-size 128 --dtype bf16
    python benchmarks/throughput.py --compile --json results/throughput.json

One step is forward, cross-entropy, zeroed gradients and loss.backward() (no optimizer, so only the models differ).
timm's model is built with the same width, depth, heads, MLP size, patch and image size; vitlib.from_timm copies its
weights, and the logits of the two are compared before any timing. Rounds alternate between the two models (the order
flips every round); the table gives the median images/s of each and the median of the per-round ratios, so machine
noise falls on both alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import vitlib  # noqa: E402
from course.timing import device_name, timed_rounds  # noqa: E402
from vitlib import count_parameters, parse_name  # noqa: E402
from vitlib.utils import write_json  # noqa: E402


def build_models(args, device: torch.device):
    """timm's VisionTransformer at the configuration of args.model, and vitlib's with the same weights."""
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    cfg = parse_name(args.model)
    if "hybrid" in cfg:
        raise SystemExit(f"{args.model}: hybrid models have no timm VisionTransformer counterpart here.")
    if args.depth:
        cfg["depth"] = args.depth
    torch.manual_seed(0)
    timm_model = TimmViT(
        img_size=args.image_size,
        patch_size=cfg["patch_size"],
        in_chans=3,
        num_classes=args.num_classes,
        embed_dim=cfg["dim"],
        depth=cfg["depth"],
        num_heads=cfg["heads"],
        mlp_ratio=cfg["mlp_dim"] / cfg["dim"],
        qkv_bias=True,
    )
    ours = vitlib.from_timm(timm_model)
    return cfg, ours.to(device), timm_model.to(device)


@torch.no_grad()
def max_logit_diff(a, b, images) -> float:
    a.eval(), b.eval()
    diff = (a(images) - b(images)).abs().max().item()
    a.train(), b.train()
    return diff


def train_step(model, images, labels, autocast) -> None:
    with autocast:
        loss = F.cross_entropy(model(images), labels)
    model.zero_grad(set_to_none=True)
    loss.backward()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model", default="ViT-Ti/4", help="vitlib variant name, e.g. ViT-Ti/4, ViT-S/16 (default: %(default)s)"
    )
    ap.add_argument(
        "--depth",
        type=int,
        default=6,
        help="override the variant's number of blocks; 0 keeps the variant's own (default: %(default)s, "
        "so the CPU default runs in under a minute)",
    )
    ap.add_argument("--image-size", type=int, default=32, help="default: %(default)s")
    ap.add_argument("--num-classes", type=int, default=10, help="default: %(default)s")
    ap.add_argument("--batch-size", type=int, default=64, help="default: %(default)s")
    ap.add_argument(
        "--steps", type=int, default=None, help="timed steps per round and model (default: 2 on the CPU, 20 on a GPU)"
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=11,
        help="rounds, each timing both models back to back; medians are reported (default: %(default)s)",
    )
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per model first (default: %(default)s)")
    ap.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda (default: %(default)s)"
    )
    ap.add_argument(
        "--dtype",
        choices=("fp32", "bf16"),
        default="fp32",
        help="fp32, or bf16 autocast (weights stay fp32) (default: %(default)s)",
    )
    ap.add_argument(
        "--compile", action="store_true", help="torch.compile both models (the warm-up then includes compiling)"
    )
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the results as JSON to PATH")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    args.steps = args.steps or (2 if device.type == "cpu" else 20)
    cfg, ours, ref = build_models(args, device)
    n_ours, n_ref = count_parameters(ours), count_parameters(ref)
    print(f"parameters: vitlib {n_ours:,}  timm {n_ref:,}")
    if n_ours != n_ref:
        raise SystemExit("parameter counts differ: the two models are not the same architecture.")

    g = torch.Generator().manual_seed(0)
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size, generator=g).to(device)
    labels = torch.randint(0, args.num_classes, (args.batch_size,), generator=g).to(device)
    diff = max_logit_diff(ours, ref, images)
    print(f"max |logits vitlib - logits timm| = {diff:.2e} (fp32, eval mode, same weights)")
    if diff > 1e-3:
        raise SystemExit("the two models do not compute the same function; not timing them.")

    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.dtype == "bf16" else nullcontext()
    models = {"vitlib": ours, "timm": ref}
    if args.compile:
        models = {k: torch.compile(m) for k, m in models.items()}
    steps = {k: (lambda m=m: train_step(m, images, labels, autocast)) for k, m in models.items()}
    rates = timed_rounds(steps, args.warmup, args.rounds, args.steps, args.batch_size, device)
    med = {k: statistics.median(v) for k, v in rates.items()}
    # both models of a round ran seconds apart, so the per-round ratio cancels slow drifts in machine load
    ratio = statistics.median(a / b for a, b in zip(rates["vitlib"], rates["timm"]))

    config = (
        f"D={cfg['dim']} L={cfg['depth']} H={cfg['heads']} MLP={cfg['mlp_dim']} P={cfg['patch_size']} "
        f"{args.image_size}px B={args.batch_size} {args.dtype}{' compiled' if args.compile else ''}"
    )
    threads = torch.get_num_threads()
    where = device_name(device) + ("" if device.type == "cuda" else f", {threads} thread{'s' if threads > 1 else ''}")
    print(f"\nTraining steps (forward + backward), median of {args.rounds} rounds x {args.steps} steps, on {where}\n")
    print("| model | config | vitlib images/s | timm images/s | vitlib / timm |")
    print("|---|---|---:|---:|---:|")
    print(f"| {args.model} | {config} | {med['vitlib']:.1f} | {med['timm']:.1f} | {ratio:.3f}x |")
    spread = {k: f"{min(v):.1f}-{max(v):.1f}" for k, v in rates.items()}
    print(
        f"\nvitlib / timm is the median of the {args.rounds} per-round ratios (ratio of the medians: "
        f"{med['vitlib'] / med['timm']:.3f}); per-round images/s ranged vitlib {spread['vitlib']}, "
        f"timm {spread['timm']}"
    )

    if args.json:
        import timm

        result = dict(
            model=args.model,
            config=dict(
                cfg,
                image_size=args.image_size,
                num_classes=args.num_classes,
                batch_size=args.batch_size,
                dtype=args.dtype,
                compile=args.compile,
            ),
            steps=args.steps,
            rounds=args.rounds,
            warmup=args.warmup,
            parameters=n_ours,
            max_logit_diff=diff,
            images_per_s=med,
            rounds_images_per_s=rates,
            ratio_vitlib_over_timm=ratio,
            ratio_of_medians=med["vitlib"] / med["timm"],
            torch=torch.__version__,
            timm=timm.__version__,
            device=args.device,
            device_name=device_name(device),
            threads=threads,
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        write_json(args.json, result, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
