"""Pre-training speed on one device: training images/s of vitlib, timm and torchvision for ViT-S/16 and ViT-B/16.

    python benchmarks/pretraining_speed.py                       # CPU-sized default: 32x32, 2 blocks, batch 8, fp32
    python benchmarks/pretraining_speed.py --device cuda --compile --dtype bf16 --batch-size 256,128 \\
        --json results/gpu/pretraining_speed.json --markdown results/gpu/pretraining_speed.md

One step is a full training step: forward, cross-entropy, optimizer.zero_grad, backward and an AdamW step (fused on
cuda), under bf16 autocast or in fp32, with or without torch.compile, the same for every implementation. After the
warm-up steps (torch.compile compiles there) the implementations take turns in rounds of --steps steps, the order
reversed every round; each round is timed with torch.cuda.synchronize around the whole block of steps, with no
.item() inside it. The table gives the median images/s and the median of the per-round ratios vitlib / timm and
vitlib / torchvision (torchvision has no ViT-S).

FLOPs per image of a training step (forward + backward, not the optimizer) are counted with FlopCounterMode on one
small batch of each implementation, with SDPA's math backend (its matrix products are counted on every device;
FlopCounterMode has no formula for the CPU's fused attention kernel). They should be about 3 x the analytic forward
FLOPs of vitlib.analysis.cost: the backward pass computes no gradient for the input images, so it is 3x minus one
patch-embedding forward. MFU = train FLOPs per image x images/s / peak, against a nominal peak (--peak-tflops) and
against the best TFLOP/s of a large matrix product in the run's dtype measured on the same device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vitlib  # noqa: E402
from course.timing import device_name, sync, timed_rounds  # noqa: E402
from vitlib import count_parameters, parse_name  # noqa: E402
from vitlib.analysis.cost import model_flops  # noqa: E402
from vitlib.utils import write_json  # noqa: E402

# the model sizes compared, with their 224x224 counterparts in timm and torchvision (None: there is none)
SIZES = {
    "S": dict(name="ViT-S/16", timm="vit_small_patch16_224", torchvision=None),
    "B": dict(name="ViT-B/16", timm="vit_base_patch16_224", torchvision="vit_b_16"),
}
IMPLEMENTATIONS = ("vitlib", "timm", "torchvision")
NOMINAL_PEAK_TFLOPS = 989.0  # H100 SXM, dense bf16 tensor cores
GOAL_RATIO_TIMM = 1.10  # vitlib >= 1.10x timm's images/s
GOAL_MFU = dict(size="B", mfu=0.50)  # MFU >= 50% for ViT-B/16
FLOP_COUNT_BATCH = 2


def parse_sizes(text: str) -> list[str]:
    sizes = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        raise SystemExit(
            f"unknown model size {', '.join(map(repr, unknown)) or repr(text)} in --models: the valid sizes "
            f"are {', '.join(SIZES)} (comma-separated, e.g. --models S,B)."
        )
    return sizes


def parse_batch_sizes(text: str | None, sizes: list[str], device: torch.device) -> dict[str, int]:
    """One batch size for every model size, or a comma list with one per size in --models order."""
    if text is None:
        defaults = dict(S=256, B=128) if device.type == "cuda" else dict(S=8, B=8)
        return {s: defaults[s] for s in sizes}
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(
            f"--batch-size {text!r}: expected an integer or a comma list of integers, e.g. 256,128."
        ) from None
    if len(values) == 1:
        values *= len(sizes)
    if len(values) != len(sizes) or min(values) < 1:
        raise SystemExit(
            f"--batch-size {text!r}: give one positive batch size, or one per model size in --models "
            f"({','.join(sizes)})."
        )
    return dict(zip(sizes, values))


def architecture(size: str, depth: int) -> dict:
    """vitlib's configuration of the size with patch 16, the depth overridden when depth > 0."""
    cfg = parse_name(SIZES[size]["name"])
    if depth:
        cfg["depth"] = depth
    return cfg


def build_models(size: str, image_size: int, depth: int) -> dict[str, torch.nn.Module]:
    """The implementations of one size (on the CPU): the libraries' own 224x224 models when nothing is overridden,
    else their VisionTransformer classes at the same width, depth, heads, MLP size, patch and image size."""
    import timm
    import torchvision
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    spec, cfg = SIZES[size], architecture(size, depth)
    native = image_size == 224 and not depth
    torch.manual_seed(0)
    models = {
        "vitlib": vitlib.create_model(
            spec["name"], num_classes=1000, image_size=image_size, **({"depth": depth} if depth else {})
        )
    }
    if native:
        models["timm"] = timm.create_model(spec["timm"], pretrained=False)
    else:
        models["timm"] = TimmViT(
            img_size=image_size,
            patch_size=16,
            embed_dim=cfg["dim"],
            depth=cfg["depth"],
            num_heads=cfg["heads"],
            mlp_ratio=cfg["mlp_dim"] / cfg["dim"],
            qkv_bias=True,
            num_classes=1000,
        )
    if spec["torchvision"] and native:
        models["torchvision"] = getattr(torchvision.models, spec["torchvision"])(weights=None)
    elif spec["torchvision"]:
        models["torchvision"] = torchvision.models.VisionTransformer(
            image_size=image_size,
            patch_size=16,
            num_layers=cfg["depth"],
            num_heads=cfg["heads"],
            hidden_dim=cfg["dim"],
            mlp_dim=cfg["mlp_dim"],
            num_classes=1000,
        )
    return models


def check_parameters(size: str, models: dict[str, torch.nn.Module]) -> dict[str, int]:
    """Equal parameter counts, or stop: the same architecture in every implementation. torchvision's may only
    differ by the layout of its head and biases, so a difference there is printed, not fatal."""
    counts = {k: count_parameters(m) for k, m in models.items()}
    print(f"{SIZES[size]['name']} parameters: " + "  ".join(f"{k} {n:,}" for k, n in counts.items()))
    if counts["timm"] != counts["vitlib"]:
        raise SystemExit(
            f"{SIZES[size]['name']}: vitlib has {counts['vitlib']:,} parameters and timm "
            f"{counts['timm']:,}: the two are not the same architecture."
        )
    if "torchvision" in counts and counts["torchvision"] != counts["vitlib"]:
        print(f"  torchvision differs from vitlib by {counts['torchvision'] - counts['vitlib']:+,} parameters")
    return counts


def train_flops_per_image(model: torch.nn.Module, image_size: int, device: torch.device) -> float:
    """FLOPs of forward + cross-entropy + backward per image, counted by FlopCounterMode on a small fp32 batch."""
    images = torch.randn(FLOP_COUNT_BATCH, 3, image_size, image_size, device=device)
    labels = torch.zeros(FLOP_COUNT_BATCH, dtype=torch.long, device=device)
    # the math backend writes attention as matrix products, which FlopCounterMode counts on every device
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        F.cross_entropy(model(images), labels).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / FLOP_COUNT_BATCH


def matmul_peak_tflops(
    device: torch.device, dtype: torch.dtype, n: int, blocks: int = 10, seconds: float = 1.0
) -> float:
    """The best TFLOP/s of an n x n by n x n matrix product in dtype, over up to `blocks` timed blocks that take
    about `seconds` in all (fewer blocks when one product alone takes longer than a block should)."""
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(device=device, dtype=dtype) for _ in range(2))
    a @ b  # warm-up: library setup and the first call's allocations
    sync(device)
    start = time.perf_counter()
    a @ b
    sync(device)
    once = time.perf_counter() - start
    per_block = max(1, round(seconds / blocks / once))
    best = 0.0
    for _ in range(max(1, min(blocks, round(seconds / (per_block * once))))):
        sync(device)
        start = time.perf_counter()
        for _ in range(per_block):
            a @ b
        sync(device)
        best = max(best, 2 * n**3 * per_block / (time.perf_counter() - start))
    return best / 1e12


def make_step(model, optimizer, images, labels, autocast):
    """One full training step: forward, cross-entropy, zero_grad, backward, optimizer step; nothing read back."""

    def step() -> None:
        with autocast:
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def benchmark_size(size: str, args, device: torch.device, batch_size: int) -> dict:
    """Build, count, warm up and time the implementations of one model size; every number of it as a dict."""
    spec, cfg = SIZES[size], architecture(size, args.depth)
    models = build_models(size, args.image_size, args.depth)
    counts = check_parameters(size, models)
    analytic_forward = model_flops(models["vitlib"])["total"]
    for m in models.values():
        m.to(device).train()
    flops = {k: train_flops_per_image(m, args.image_size, device) for k, m in models.items()}

    g = torch.Generator().manual_seed(0)
    images = torch.randn(batch_size, 3, args.image_size, args.image_size, generator=g).to(device)
    labels = torch.randint(0, 1000, (batch_size,), generator=g).to(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.dtype == "bf16" else nullcontext()
    steps = {}
    for name, model in models.items():
        # fused AdamW runs the whole update in a few kernels on cuda; the CPU gets the default implementation
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if device.type == "cuda" else {}))
        steps[name] = make_step(torch.compile(model) if args.compile else model, optimizer, images, labels, autocast)
    rates = timed_rounds(steps, args.warmup, args.rounds, args.steps, batch_size, device)
    # the implementations of a round ran seconds apart, so the per-round ratio cancels slow drifts in machine load
    ratios = {}
    for other in [k for k in steps if k != "vitlib"]:
        per_round = [a / b for a, b in zip(rates["vitlib"], rates[other])]
        ratios[f"vitlib/{other}"] = dict(median=statistics.median(per_round), rounds=per_round)

    impls = {}
    for name in steps:
        median = statistics.median(rates[name])
        tflops = flops[name] * median / 1e12
        impls[name] = dict(
            images_per_s=median,
            rounds_images_per_s=rates[name],
            train_flops_per_image=flops[name],
            flops_over_analytic=flops[name] / (3 * analytic_forward),
            achieved_tflops=tflops,
            mfu_nominal=tflops / args.peak_tflops if args.peak_tflops else None,
            mfu_measured=tflops / args.measured_peak_tflops,
        )
    return dict(
        name=spec["name"],
        config=dict(cfg, image_size=args.image_size, num_classes=1000),
        batch_size=batch_size,
        parameters=counts,
        analytic_forward_flops_per_image=analytic_forward,
        analytic_train_flops_per_image=3 * analytic_forward,
        implementations=impls,
        ratios=ratios,
        missing={} if spec["torchvision"] else {"torchvision": f"torchvision has no {spec['name']}"},
    )


def percent(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def goal(value: float | None, target: float) -> str:
    return "n/a" if value is None else ("met" if value >= target else "not met")


def report(results: dict, args, where: str, peak_label: str) -> str:
    """The markdown table and the notes under it."""
    nominal = f"{args.peak_tflops:g} TFLOP/s" if args.peak_tflops else "n/a"
    lines = [
        "| model | config | implementation | images/s | vitlib / this | train GFLOP/image | TFLOP/s | "
        f"MFU vs nominal ({nominal}) | MFU vs measured ({peak_label}) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for size, res in results["models"].items():
        c = res["config"]
        config = (
            f"D={c['dim']} L={c['depth']} H={c['heads']} MLP={c['mlp_dim']} P=16 {c['image_size']}px "
            f"B={res['batch_size']}"
        )
        for name in IMPLEMENTATIONS:
            if name in res["missing"]:
                lines.append(f"| {res['name']} | {config} | {name} | n/a: {res['missing'][name]} | | | | | |")
                continue
            r = res["implementations"][name]
            ratio = "" if name == "vitlib" else f"{res['ratios'][f'vitlib/{name}']['median']:.3f}x"
            lines.append(
                f"| {res['name']} | {config} | {name} | {r['images_per_s']:.1f} | {ratio} | "
                f"{r['train_flops_per_image'] / 1e9:.3f} | {r['achieved_tflops']:.3f} | "
                f"{percent(r['mfu_nominal'])} | {percent(r['mfu_measured'])} |"
            )
        vit = res["implementations"]["vitlib"]
        spread = ", ".join(
            f"{k} {min(v['rounds_images_per_s']):.1f}-{max(v['rounds_images_per_s']):.1f}"
            for k, v in res["implementations"].items()
        )
        notes.append(
            f"- {res['name']}: parameters "
            + ", ".join(f"{k} {n:,}" for k, n in res["parameters"].items())
            + f"; per-round images/s {spread}. 3 x forward FLOPs of vitlib.analysis.cost = "
            f"{res['analytic_train_flops_per_image'] / 1e9:.3f} GFLOP/image; FlopCounterMode / that = "
            + ", ".join(f"{k} {v['flops_over_analytic']:.4f}" for k, v in res["implementations"].items())
            + " (the backward computes no gradient for the images: 3x minus one patch-embedding forward)."
        )
        ratio_timm, per_round = res["ratios"]["vitlib/timm"]["median"], res["ratios"]["vitlib/timm"]["rounds"]
        notes.append(
            f"- goal vitlib >= {GOAL_RATIO_TIMM:.2f}x timm ({res['name']}): {ratio_timm:.3f}x (per round "
            f"{min(per_round):.3f}-{max(per_round):.3f}), {goal(ratio_timm, GOAL_RATIO_TIMM)}."
        )
        if size == GOAL_MFU["size"]:
            notes.append(
                f"- goal MFU >= {percent(GOAL_MFU['mfu'])} ({res['name']}, vitlib): "
                f"{percent(vit['mfu_nominal'])} vs nominal ({goal(vit['mfu_nominal'], GOAL_MFU['mfu'])}), "
                f"{percent(vit['mfu_measured'])} vs measured "
                f"({goal(vit['mfu_measured'], GOAL_MFU['mfu'])})."
            )
    s = results["settings"]
    head = (
        f"Full training steps (forward, cross-entropy, backward, {s['optimizer']}), {s['dtype']}"
        f"{', compiled' if s['compile'] else ''}, median of {s['rounds']} rounds x {s['steps']} steps after "
        f"{s['warmup']} warm-up steps, on {where}; vitlib / this is the median of the per-round ratios."
    )
    return "\n".join([head, "", *lines, "", *notes])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cpu or cuda (default: %(default)s)"
    )
    ap.add_argument("--models", default="S,B", help="model sizes, comma-separated: S, B (default: %(default)s)")
    ap.add_argument("--image-size", type=int, default=None, help="default: 224 on cuda, 32 on the CPU")
    ap.add_argument(
        "--depth",
        type=int,
        default=None,
        help="override the number of blocks; 0 keeps the variant's own (default: 0 on cuda, 2 on the CPU)",
    )
    ap.add_argument(
        "--batch-size",
        default=None,
        help="one batch size, or one per size in --models order, e.g. 256,128 (default: 256,128 on cuda, 8 on the CPU)",
    )
    ap.add_argument(
        "--dtype",
        choices=("bf16", "fp32"),
        default=None,
        help="bf16 autocast (weights stay fp32) or fp32 (default: bf16 on cuda, fp32 on the CPU)",
    )
    ap.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile every model; the warm-up then includes compiling (default: on for cuda, off on the CPU)",
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps per round and implementation (default: 20 on cuda, 2 on the CPU)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=7,
        help="rounds, each timing every implementation back to back; medians are reported (default: %(default)s)",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed steps per implementation first (default: 5 on cuda, 1 on the CPU)",
    )
    ap.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help=f"nominal peak TFLOP/s in the run's dtype for MFU (default: {NOMINAL_PEAK_TFLOPS:g}, H100 SXM "
        f"dense bf16, on cuda with bf16; none otherwise, printed n/a)",
    )
    ap.add_argument(
        "--matmul-size",
        type=int,
        default=None,
        help="n of the n x n matrix product that measures the peak (default: 8192 on cuda, 1024 on the CPU)",
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="write everything (settings, versions, every round) as JSON to PATH",
    )
    ap.add_argument(
        "--markdown",
        type=Path,
        default=None,
        metavar="PATH",
        help="write the table with a header line (date, device, settings) to PATH",
    )
    args = ap.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available; use --device cpu.")
    if device.type not in ("cpu", "cuda"):
        raise SystemExit(f"--device {args.device!r}: use cpu or cuda.")
    gpu = device.type == "cuda"
    sizes = parse_sizes(args.models)
    batch_sizes = parse_batch_sizes(args.batch_size, sizes, device)
    args.image_size = args.image_size or (224 if gpu else 32)
    args.depth = (0 if gpu else 2) if args.depth is None else args.depth
    args.dtype = args.dtype or ("bf16" if gpu else "fp32")
    args.compile = gpu if args.compile is None else args.compile
    args.steps = args.steps or (20 if gpu else 2)
    args.warmup = (5 if gpu else 1) if args.warmup is None else args.warmup
    if args.peak_tflops is None and gpu and args.dtype == "bf16":
        args.peak_tflops = NOMINAL_PEAK_TFLOPS
    args.matmul_size = args.matmul_size or (8192 if gpu else 1024)
    if min(args.steps, args.rounds) < 1 or args.warmup < 0 or args.depth < 0:
        raise SystemExit("--steps and --rounds must be at least 1, --warmup and --depth at least 0.")

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    args.measured_peak_tflops = matmul_peak_tflops(device, dtype, args.matmul_size)
    peak_label = f"{args.measured_peak_tflops:.3g} TFLOP/s"
    print(
        f"measured peak: {args.measured_peak_tflops:.3f} TFLOP/s ({args.matmul_size}x{args.matmul_size} "
        f"{args.dtype} matmul, the best of about 1 s of products)"
    )

    import timm
    import torchvision

    threads = torch.get_num_threads()
    where = device_name(device) + ("" if gpu else f", {threads} thread{'s' if threads > 1 else ''}")
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    results = dict(
        device=args.device,
        device_name=device_name(device),
        threads=threads,
        date=date,
        torch=torch.__version__,
        timm=timm.__version__,
        torchvision=torchvision.__version__,
        settings=dict(
            models=sizes,
            image_size=args.image_size,
            depth=args.depth,
            batch_sizes=batch_sizes,
            dtype=args.dtype,
            compile=args.compile,
            steps=args.steps,
            rounds=args.rounds,
            warmup=args.warmup,
            optimizer="AdamW (fused)" if gpu else "AdamW",
            peak_tflops_nominal=args.peak_tflops,
            matmul_size=args.matmul_size,
        ),
        measured_peak_tflops=args.measured_peak_tflops,
        goals=dict(ratio_vitlib_over_timm=GOAL_RATIO_TIMM, mfu_vitb16=GOAL_MFU["mfu"]),
        models={},
    )
    for size in sizes:
        results["models"][size] = benchmark_size(size, args, device, batch_sizes[size])

    table = report(results, args, where, peak_label)
    print("\n" + table)
    if args.json:
        write_json(args.json, results, indent=2)
        print(f"wrote {args.json}")
    if args.markdown:
        s = results["settings"]
        header = (
            f"{date}, {where}, torch {torch.__version__}, timm {timm.__version__}, torchvision "
            f"{torchvision.__version__}; settings: image {s['image_size']}, depth {s['depth'] or 'own'}, batch "
            + ",".join(f"{k}={v}" for k, v in batch_sizes.items())
            + f", {s['dtype']}, compile {'on' if s['compile'] else 'off'}"
        )
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(header + "\n\n" + table + "\n")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
