"""Does bf16 autocast or torch.compile pay on the CPU at the course's model sizes? One run measures, for each model,
the training images/s of fp32 and bf16 autocast, eager and compiled (timed in turns, order reversed every round),
and the test accuracy each mode reaches after the same short training on the bundled data.

    python benchmarks/cpu_speed.py                                  # about 10 minutes on 2 cores
    python benchmarks/cpu_speed.py --json results/reference/cpu_speed.json --threads 1

The ratios are against fp32 eager in the same run; the accuracy check trains each mode from the same seed.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vitlib  # noqa: E402
from course.timing import device_name, timed_rounds  # noqa: E402
from vitlib.data import get_dataset  # noqa: E402
from vitlib.train import TrainConfig, train  # noqa: E402
from vitlib.utils import write_json  # noqa: E402

MODES = {
    "fp32 eager": (None, False),
    "bf16 eager": (torch.bfloat16, False),
    "fp32 compiled": (None, True),
    "bf16 compiled": (torch.bfloat16, True),
}


def step_fn(model_name: str, dtype, compiled: bool, batch: int):
    torch.manual_seed(0)
    model = vitlib.create_model(model_name, num_classes=10, image_size=28, in_channels=1)
    net = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

    def step():
        with torch.autocast("cpu", dtype=dtype) if dtype else nullcontext():
            loss = F.cross_entropy(net(images).float(), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def accuracy(model_name: str, precision: str, compiled: bool, epochs: int, data) -> tuple[float, float]:
    cfg = TrainConfig(
        model=model_name,
        epochs=epochs,
        batch_size=128,
        lr=2e-3,
        warmup_epochs=0.5,
        device="cpu",
        precision=precision,
        compile=compiled,
        progress=False,
        seed=0,
    )
    start = time.perf_counter()
    result = train(cfg, data=data)
    return result.test["acc"], time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="ViT-Micro/4,ViT-Mini/4,ViT-Micro/7", help="comma-separated vitlib names")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per round and mode")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of the accuracy check (0: skip it)")
    ap.add_argument("--threads", type=int, default=0, help="PyTorch CPU threads (0: PyTorch's default)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    data = get_dataset("fashion-mnist-mini") if args.epochs else None
    rows = []
    for name in args.models.split(","):
        steps = {mode: step_fn(name, dtype, compiled, args.batch_size) for mode, (dtype, compiled) in MODES.items()}
        rates = timed_rounds(steps, 3, args.rounds, args.steps, args.batch_size, torch.device("cpu"))
        base = rates["fp32 eager"]
        for mode in MODES:
            ratio = statistics.median(a / b for a, b in zip(rates[mode], base))
            row = {"model": name, "mode": mode, "images_per_s": statistics.median(rates[mode]), "vs_fp32_eager": ratio}
            if args.epochs:
                dtype, compiled = MODES[mode]
                row["test_acc"], row["train_s"] = accuracy(
                    name, "bf16" if dtype else "fp32", compiled, args.epochs, data
                )
            rows.append(row)
            print(row, flush=True)
    where = f"{device_name(torch.device('cpu'))}, {torch.get_num_threads()} threads"
    print(
        f"\nTraining step, batch {args.batch_size}, median of {args.rounds} rounds x {args.steps} steps, on {where}\n"
    )
    print("| model | mode | images/s | vs fp32 eager | test acc after " + f"{args.epochs} epochs | train s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['mode']} | {r['images_per_s']:.0f} | {r['vs_fp32_eager']:.2f}x | "
            f"{r.get('test_acc', float('nan')):.4f} | {r.get('train_s', float('nan')):.0f} |"
        )
    if args.json:
        info = {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": where,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "args": vars(args),
            "rows": rows,
        }
        write_json(args.json, info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
