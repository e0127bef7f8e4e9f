"""The training loop's own overhead: images/s of vitlib.train against a bare PyTorch loop, same model, data and batch.

    python benchmarks/loop_overhead.py [--model ViT-Micro/4] [--batch-size 128] [--steps 60]

Both loops run the same work per step (forward, cross-entropy, backward, clip to norm 1, AdamW, LR schedule) on the
bundled data; vitlib.train adds its data order, metric sums, progress bar and logging. Rounds alternate between the
two and the median is reported, so machine noise falls on both alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from vitlib import create_model  # noqa: E402
from vitlib.data import get_dataset  # noqa: E402
from vitlib.train import TrainConfig, train  # noqa: E402


def bare_loop(model, images, labels, batch_size, steps, log_every=10) -> float:
    """images/s of the plainest loop (slices of a pre-normalised tensor), as the median over intervals of `log_every`
    steps without the first one, exactly as vitlib.train's per-interval images/s are taken below."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    rates, start = [], time.perf_counter()
    for i in range(steps):
        j = (i * batch_size) % (len(labels) - batch_size)
        x, y = images[j : j + batch_size], labels[j : j + batch_size]
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (i + 1) % log_every == 0:
            loss.item()  # vitlib.train syncs once per interval too
            now = time.perf_counter()
            rates.append(log_every * batch_size / (now - start))
            start = now
    return statistics.median(rates[1:])


def vitlib_loop(cfg: TrainConfig, data) -> float:
    result = train(cfg, data=data)
    rows = result.steps[1:]  # the first interval holds the warm-up
    return statistics.median(r["images_per_s"] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="ViT-Micro/4")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=60, help="steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    data = get_dataset("fashion-mnist-mini", val_fraction=0.0)
    n = args.steps * args.batch_size
    data.train = data.train.select(torch.arange(min(n, len(data.train))))
    mean, std = torch.tensor(data.mean).view(1, -1, 1, 1), torch.tensor(data.std).view(1, -1, 1, 1)
    images = (data.train.images.float() / 255 - mean) / std
    bare, ours = [], []
    for _ in range(args.rounds):
        torch.manual_seed(0)
        model = create_model(args.model, num_classes=10, image_size=28, in_channels=1)
        bare.append(bare_loop(model, images, data.train.labels, args.batch_size, len(data.train) // args.batch_size))
        cfg = TrainConfig(
            model=args.model,
            batch_size=args.batch_size,
            epochs=1,
            progress=True,
            eval_test=False,
            log_every=10,
            warmup_epochs=0.1,
        )
        ours.append(vitlib_loop(cfg, data))
    b, o = statistics.median(bare), statistics.median(ours)
    print(
        f"\n| loop | images/s (median of {args.rounds}) |\n|---|---:|\n"
        f"| bare PyTorch | {b:.0f} |\n| vitlib.train | {o:.0f} |"
    )
    print(
        f"vitlib.train / bare = {o / b:.3f} ({args.model}, batch {args.batch_size}, {torch.get_num_threads()} threads)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
