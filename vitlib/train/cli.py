"""The command line: every TrainConfig field is an option (`python -m vitlib.train --help`); a --preset gives the
defaults, the options given win."""

from __future__ import annotations

import argparse
import dataclasses
import os

import torch.distributed as dist

from ..data import DataError
from ..utils import command_line
from .checkpoint import CheckpointError
from .config import TrainConfig
from .folder import RunFolderError
from .loop import NonFiniteLossError, train
from .presets import describe, preset_options

# errors main reports by their message alone, exit status 2 (any other: with its kind and a hint)
ERRORS = ValueError, FileExistsError, FileNotFoundError, CheckpointError, NonFiniteLossError, DataError, RunFolderError
DESCRIPTION = (
    "One training loop for ViT, the hybrid and the CNN baselines, from a 2-core CPU to several GPUs "
    "(torchrun + DDP, or FSDP2 with --fsdp to shard ViT-L/H)."
)


def _optional(kind):
    def parse(text: str):  # argparse names `parse` in its message for a bad value
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
        if f.type == "bool":
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=f.metadata["help"])
            continue
        kind = f.type.split("|")[0].strip()  # a string: config.py has `from __future__ import annotations`
        parse = {"int": int, "float": float, "str": str}[kind]
        if "None" in f.type:
            parse = _optional(parse)
        ap.add_argument(flag, type=parse, default=f.default, help=f.metadata["help"], metavar=kind.upper())
    ap.set_defaults(**preset_options(preset))
    return ap


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """The TrainConfig of a command line: the options of --preset (if any) are the defaults, the options given win."""
    first, _ = make_parser().parse_known_args(argv)  # which preset, if any, gives the defaults
    args = vars(make_parser(getattr(first, "preset", None)).parse_args(argv))
    return TrainConfig(**{k: v for k, v in args.items() if k not in ("preset", "list_presets")})


def main(argv: list[str] | None = None) -> int:
    """The command line, inside the error boundary: any failure is `error: ...` and exit code 2 (vitlib.utils)."""
    return command_line(lambda: _main(argv), plain=ERRORS)


def _main(argv: list[str] | None) -> int:
    if getattr(make_parser().parse_known_args(argv)[0], "list_presets", False):
        print(describe())
        return 0
    result = train(parse_config(argv))
    if result.test and int(os.environ.get("RANK", "0")) == 0:
        metrics = " ".join(f"{k} {v:.4f}" for k, v in result.test.items() if k != "n")  # no accuracy for MAE
        print(f"test: {metrics} ({result.test['n']} images)")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0
