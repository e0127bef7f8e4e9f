"""The command line: every TrainConfig field is an option (`python -m vitlib.train --help`), a --preset gives the
defaults and the options written after it win."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch.distributed as dist

from ..data import DataError
from .checkpoint import CheckpointError
from .config import TrainConfig
from .folder import RunFolderError
from .loop import NonFiniteLossError, train
from .presets import describe, preset_options

DESCRIPTION = (
    "One training loop for ViT, the hybrid and the CNN baselines, from a 2-core CPU to several GPUs "
    "(torchrun + DDP, or FSDP2 with --fsdp to shard ViT-L/H)."
)


def _parse_optional(kind):
    def parse(text: str):
        return None if text.lower() in ("none", "null", "") else kind(text)

    return parse


def make_parser(preset: str | None = None) -> argparse.ArgumentParser:
    """The command line; with a preset, its options are the defaults (so any option given explicitly wins)."""
    ap = argparse.ArgumentParser(
        prog="python -m vitlib.train",
        description=DESCRIPTION,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        allow_abbrev=False,
    )
    # absent from the parsed namespace unless given, so TrainConfig(**vars(make_parser().parse_args(argv))) still works
    ap.add_argument(
        "--preset",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help="a named recipe of vitlib.train.presets (paper-imagenet, deit, mae, mpp, fmnist-5min, ...); options "
        "given explicitly override it",
    )
    ap.add_argument(
        "--list-presets", action="store_true", default=argparse.SUPPRESS, help="describe every preset and exit"
    )
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata["help"])
            continue
        base = {"int": int, "float": float, "str": str}
        kind = f.type if not isinstance(f.type, str) else f.type.split("|")[0].strip()
        parse = base.get(kind, float if "float" in kind else str)
        if "None" in str(f.type):
            parse = _parse_optional(parse)
        ap.add_argument(flag, type=parse, default=f.default, help=f.metadata["help"], metavar=kind.upper())
    ap.set_defaults(**preset_options(preset))
    return ap


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """The TrainConfig of a command line: the options of --preset (if any) are the defaults, the options given win."""
    first, _ = make_parser().parse_known_args(argv)  # which preset, if any, gives the defaults
    args = vars(make_parser(getattr(first, "preset", None)).parse_args(argv))
    args.pop("preset", None)
    args.pop("list_presets", None)
    return TrainConfig(**args)


def format_metrics(metrics: dict) -> str:
    """'loss 0.4321 acc 0.8120 (2000 images)': the metrics the objective has (no accuracy for MAE), in that order."""
    values = " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if k != "n" and isinstance(v, float | int))
    return f"{values} ({metrics['n']} images)" if "n" in metrics else values


def main(argv: list[str] | None = None) -> int:
    if getattr(make_parser().parse_known_args(argv)[0], "list_presets", False):
        print(describe())
        return 0
    try:
        cfg = parse_config(argv)
    except ValueError as err:  # an unknown preset, an option out of its range
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        result = train(cfg)
    except (
        ValueError,
        FileExistsError,
        FileNotFoundError,
        CheckpointError,
        NonFiniteLossError,
        DataError,
        RunFolderError,
    ) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if result.test and int(os.environ.get("RANK", "0")) == 0:
        print(f"test: {format_metrics(result.test)}")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0
