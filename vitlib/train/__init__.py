"""The engine: one training loop (`train`) from a 2-core CPU to several GPUs, its options (`TrainConfig`, presets,
the command line `python -m vitlib.train`), the optimiser and schedule, checkpoints, EMA, DDP / FSDP2 and the metrics.

    from vitlib.train import TrainConfig, train
    result = train(TrainConfig(dataset="fashion-mnist-mini", model="ViT-Micro/4", epochs=3, out="runs/first"))
"""

from .checkpoint import CheckpointError, load_checkpoint, load_pretrained, read_checkpoint, save_checkpoint, save_model
from .cli import main, make_parser, parse_config
from .config import TrainConfig, check_config
from .distributed import resolve_device
from .factory import autocast_dtype, build_model, make_loader, model_config
from .folder import RunFolderError
from .loop import NonFiniteLossError, Result, Stopped, plateau_stop, train
from .metrics import evaluate
from .optim import EMA, lr_lambda, param_groups, vectorized
from .presets import PRESETS, Preset, get_preset, preset_options
from .run import ResumeMismatchError, Run, build_run
