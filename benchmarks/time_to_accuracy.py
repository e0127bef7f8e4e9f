"""Time to accuracy: train a small ViT on the full Fashion-MNIST and print test accuracy against wall-clock minutes.

    python benchmarks/time_to_accuracy.py                        # the CPU preset (2 cores: goal >= 88% in 5 min)
    python benchmarks/time_to_accuracy.py --preset gpu           # the GPU preset
    python benchmarks/time_to_accuracy.py --epochs 20 --model ViT-Mini/4 --json results/tta.json

The full set comes from $VITLIB_DATA_DIR, data/cache or Debian's dataset-fashion-mnist (`make full-fashion-mnist`).
The test set is evaluated after every epoch (no model selection on it: the recipe is fixed before the run).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vitlib.train import TrainConfig, train  # noqa: E402

PRESETS = {
    # measured on a 2-core CPU; see benchmarks/README.md for the numbers
    "cpu": dict(model="ViT-Mini/7", epochs=5, batch_size=256, lr=2e-3, weight_decay=0.05, warmup_epochs=0.5,
                augment="none", label_smoothing=0.1),
    "gpu": dict(model="ViT-Mini/4", epochs=40, batch_size=512, lr=2e-3, weight_decay=0.05, warmup_epochs=2,
                augment="crop-flip", label_smoothing=0.1),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    ap.add_argument("--json", default=None, help="write the curve and the configuration here")
    for key in ("model", "augment"):
        ap.add_argument(f"--{key}", default=None)
    for key in ("epochs", "batch_size"):
        ap.add_argument(f"--{key.replace('_', '-')}", type=int, default=None)
    for key in ("lr", "weight_decay", "warmup_epochs", "label_smoothing", "time_budget", "drop_path"):
        ap.add_argument(f"--{key.replace('_', '-')}", type=float, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    options = dict(PRESETS[args.preset])
    options.update({k: v for k, v in vars(args).items() if v is not None and k in TrainConfig.__dataclass_fields__})
    cfg = TrainConfig(val_fraction=0.0, progress=False, eval_test=False, log_every=50, **options)
    start = time.perf_counter()
    result = train(cfg)
    total = time.perf_counter() - start
    print(f"\n{cfg.model} on {cfg.dataset}, {cfg.epochs} epochs, batch {cfg.batch_size}, {torch.get_num_threads()} threads")
    print("| epoch | minutes | test acc |\n|---:|---:|---:|")
    for row in result.history:
        print(f"| {row['epoch']} | {row['time_s'] / 60:.2f} | {row['test_acc']:.4f} |")
    within = [r for r in result.history if r["time_s"] <= 300]  # the last epoch that ended (evaluation included) by 5 min
    at5 = within[-1]["test_acc"] if within else float("nan")
    print(f"total {total / 60:.2f} min; test accuracy at the last epoch ending within 5 min: {at5:.4f}; "
          f"final: {result.history[-1]['test_acc']:.4f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "date": str(date.today()), "machine": platform.processor() or platform.machine(),
            "device": torch.cuda.get_device_name() if torch.cuda.is_available() else f"cpu ({torch.get_num_threads()} threads)",
            "torch": torch.__version__, "config": cfg.__dict__, "curve": result.history}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
