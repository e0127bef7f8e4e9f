"""Time to accuracy: train a ViT from scratch and print test accuracy against wall-clock minutes.

    python benchmarks/time_to_accuracy.py                      # tta-cpu: 2 cores, goal >= 88% in 5 min
    python benchmarks/time_to_accuracy.py --preset fmnist-5min --json results/gpu/tta_fmnist.json  # GPU: 95.0%, 5 min
    python benchmarks/time_to_accuracy.py --preset cifar10-15min --data-root ~/data                # GPU: >= 94%, 15 min
    python benchmarks/time_to_accuracy.py --epochs 20 --model ViT-Mini/4 --json results/tta.json

The presets are vitlib.train.presets' (python -m vitlib.train --list-presets). Fashion-MNIST comes from
$VITLIB_DATA_DIR, data/cache or Debian's dataset-fashion-mnist (`make full-fashion-mnist`); CIFAR-10 from --data-root
(or --download where there is internet). The test set is evaluated after every epoch (no model selection on it: the
recipe is fixed before the run), and the curve's minutes count the evaluations too.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vitlib.train import TrainConfig, train  # noqa: E402
from vitlib.train.presets import PRESETS  # noqa: E402
from vitlib.utils import write_json  # noqa: E402

TIME_TO_ACCURACY = {"tta-cpu": (5.0, 0.88), "fmnist-5min": (5.0, 0.95), "cifar10-15min": (15.0, 0.94)}  # minutes, goal


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(TIME_TO_ACCURACY), default="tta-cpu")
    ap.add_argument("--dataset", default=None, help="default: the preset's")
    ap.add_argument("--data-root", default=None, help="where the data set is (default data/cache or $VITLIB_DATA_DIR)")
    ap.add_argument("--download", action="store_true", help="download the data set if it is missing (needs internet)")
    ap.add_argument("--device", default=None, help="cpu, cuda or auto (default: auto)")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--json", default=None, help="write the curve and the configuration here")
    for key in ("model", "augment", "precision"):
        ap.add_argument(f"--{key}", default=None)
    for key in ("epochs", "batch_size"):
        ap.add_argument(f"--{key.replace('_', '-')}", type=int, default=None)
    for key in ("lr", "weight_decay", "warmup_epochs", "label_smoothing", "time_budget", "drop_path"):
        ap.add_argument(f"--{key.replace('_', '-')}", type=float, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    minutes, goal = TIME_TO_ACCURACY[args.preset]
    options = dict(PRESETS[args.preset].options, val_fraction=0.0, progress=False, eval_test=False)
    options.update(
        {k: v for k, v in vars(args).items() if v not in (None, False) and k in TrainConfig.__dataclass_fields__}
    )
    cfg = TrainConfig(**options)
    start = time.perf_counter()
    result = train(cfg)
    total = time.perf_counter() - start
    where = (
        torch.cuda.get_device_name()
        if torch.cuda.is_available() and cfg.device != "cpu"
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(f"\n{cfg.model} on {cfg.dataset}, {cfg.epochs} epochs, batch {cfg.batch_size}, preset {args.preset}, {where}")
    print("| epoch | minutes | test acc |\n|---:|---:|---:|")
    for row in result.history:
        print(f"| {row['epoch']} | {row['time_s'] / 60:.2f} | {row['test_acc']:.4f} |")
    within = [
        r for r in result.history if r["time_s"] <= minutes * 60
    ]  # epochs whose training ended in time (earlier evaluations counted)
    at = within[-1]["test_acc"] if within else float("nan")
    print(
        f"total {total / 60:.2f} min; test accuracy at the last epoch ending within {minutes:g} min: {at:.4f} "
        f"(goal {goal:.2%}: {'met' if at >= goal else 'not met'}); final: {result.history[-1]['test_acc']:.4f}"
    )
    if args.json:
        info = {
            "date": str(date.today()),
            "machine": platform.processor() or platform.machine(),
            "device": torch.cuda.get_device_name()
            if torch.cuda.is_available()
            else f"cpu ({torch.get_num_threads()} threads)",
            "torch": torch.__version__,
            "preset": args.preset,
            "goal": {"minutes": minutes, "test_acc": goal},
            "test_acc_within_goal_minutes": at,
            "config": cfg.__dict__,
            "curve": result.history,
        }
        write_json(args.json, info, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
