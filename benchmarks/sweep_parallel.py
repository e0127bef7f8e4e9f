"""A sweep's runs side by side: the wall time of the same runs with 1 worker and with --jobs workers, measured in
one invocation, and a check that both give bit-identical numbers.

    python benchmarks/sweep_parallel.py                      # 09's reference recipe, 4 E_pos variants x 2 seeds
    python benchmarks/sweep_parallel.py --jobs 8 --device cuda --json results/gpu/sweep_parallel_8.json
    python benchmarks/sweep_parallel.py --jobs 8 --device cuda --start forkserver  # workers from a fresh server

Every run is 09_position_embeddings' reference run on the bundled Fashion-MNIST (ViT-Micro/7 with 2 blocks, 2,000
training images, batch 32, --steps steps, lr 3e-3), one PyTorch thread per run. The runs go through
`Experiment.batch` exactly as an experiment notebook sends them, first one after another (jobs=1), then `--jobs` at a
time; the table gives both wall times and their ratio (goal: at most 0.55x with 2 workers on 2 cores).

On a GPU the workers' sweep runs first: the one-worker sweep runs in this process and starts CUDA here, after which
no forked worker could use the GPU. A GPU's kernels need not give the same bits twice (atomic additions in some
backward passes), so there the workers' sweep also runs a second time: if it differs from itself as much as from the
one-worker sweep, the difference is the GPU's, not the workers'. The largest differences are printed and saved.
With --start forkserver the workers' sweep also runs twice: the first pays for starting the server (a fresh
interpreter importing torch and vitlib), the second forks its workers from the running server.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course.experiments import Experiment  # noqa: E402
from course.parallel import STARTS, default_jobs  # noqa: E402
from course.replication import is_timing, largest_differences  # noqa: E402
from course.timing import device_name  # noqa: E402
from vitlib.data import get_dataset, subset  # noqa: E402
from vitlib.model import create_model  # noqa: E402
from vitlib.train import TrainConfig  # noqa: E402
from vitlib.utils import write_json  # noqa: E402

VARIANTS = ("none", "learned", "learned2d", "sincos2d")


def sweep(jobs: int, cfg: TrainConfig, data, seeds: list[int], start: str = "fork") -> tuple[float, list[dict]]:
    exp = Experiment("sweep", jobs=jobs, start=start)
    start = time.perf_counter()
    with exp.batch():
        for pos in VARIANTS:

            def model(seed, pos=pos):
                return create_model("ViT-Micro/7", num_classes=10, image_size=28, in_channels=1, depth=2, pos_embed=pos)

            exp.train(pos, cfg, seeds, data=data, model=model)
    seconds = time.perf_counter() - start
    return seconds, [{k: v for k, v in r.items() if not is_timing(k)} for r in exp.rows]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=default_jobs(), help="workers of the parallel sweep (default: cores)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per variant (runs = 4 x seeds)")
    ap.add_argument("--steps", type=int, default=1000, help="optimizer steps per run (09's reference budget)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--start", default="fork", choices=STARTS, help="how the workers start (fork: default)")
    ap.add_argument("--json", default=None, help="also write the measurement to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    full = get_dataset("fashion-mnist-mini")
    data = dataclasses.replace(full, train=subset(full.train, 2000, seed=0))
    cfg = TrainConfig(
        dataset="fashion-mnist-mini", steps=args.steps, batch_size=32, lr=3e-3, device=args.device, eval_test=True
    )
    seeds = list(range(args.seeds))
    gpu = torch.device(args.device).type == "cuda"
    twice = gpu or args.start == "forkserver"  # the GPU's repeatability; a forkserver's start is paid once
    if gpu:  # workers first: the one-worker sweep starts CUDA in this process
        many, rows_many = sweep(args.jobs, cfg, data, seeds, args.start)
        many_again, again = sweep(args.jobs, cfg, data, seeds, args.start)
        one, rows_one = sweep(1, cfg, data, seeds)
    else:
        one, rows_one = sweep(1, cfg, data, seeds)
        many, rows_many = sweep(args.jobs, cfg, data, seeds, args.start)
        if twice:
            many_again, again = sweep(args.jobs, cfg, data, seeds, args.start)
    same = rows_one == rows_many
    runs = len(rows_one)
    print(f"| runs | steps each | 1 worker | {args.jobs} workers ({args.start}) | ratio | identical numbers |")
    print("|---:|---:|---:|---:|---:|---|")
    print(f"| {runs} | {args.steps} | {one:.1f} s | {many:.1f} s | {many / one:.3f}x | {'yes' if same else 'NO'} |")
    if twice:
        print(f"the workers' sweep again: {many_again:.1f} s ({many_again / one:.3f}x)")
    measured = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(torch.device(args.device)),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "runs": runs,
        "steps": args.steps,
        "jobs": args.jobs,
        "start": args.start,  # how the workers start
        "seconds_1_worker": one,
        f"seconds_{args.jobs}_workers": many,
        "ratio": many / one,
        "identical": same,
        "largest_difference_1_vs_workers": largest_differences(zip(rows_one, rows_many, strict=True)),
    }
    if twice:
        measured[f"seconds_{args.jobs}_workers_again"] = many_again
        measured["identical_workers_twice"] = again == rows_many
        measured["largest_difference_workers_twice"] = largest_differences(zip(again, rows_many, strict=True))
    if not same or gpu:
        for key in [k for k in measured if k.startswith(("largest", "identical_"))]:
            print(f"{key}: {measured[key]}")
    if args.json:
        write_json(args.json, measured)
    if gpu:  # a GPU may differ from itself; the workers are at fault only where they differ more
        return 0 if same or not measured["identical_workers_twice"] else 1
    if twice:
        return 0 if same and measured["identical_workers_twice"] else 1
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
