"""The module paths of earlier versions, kept working: `import vitlib.flops` gives the module that now holds its
names, with a DeprecationWarning that says where they are. One entry per old module; no code lives here."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

# old path -> the new module(s) that hold its names (a split module lists each part)
MOVED = {
    "vitlib.patches": ("vitlib.model.patches",),
    "vitlib.embedding": ("vitlib.model.embedding",),
    "vitlib.position": ("vitlib.model.position",),
    "vitlib.attention": ("vitlib.model.attention",),
    "vitlib.encoder": ("vitlib.model.encoder",),
    "vitlib.heads": ("vitlib.model.heads",),
    "vitlib.hybrid": ("vitlib.model.hybrid",),
    "vitlib.cnn": ("vitlib.model.cnn",),
    "vitlib.convert": ("vitlib.model.convert",),
    "vitlib.datasets": ("vitlib.data",),
    "vitlib.loader": ("vitlib.data.loader", "vitlib.data.augment"),
    "vitlib.mae": ("vitlib.objectives.mae",),
    "vitlib.masked": ("vitlib.objectives.mpp",),
    "vitlib.checkpoint": ("vitlib.train.checkpoint",),
    "vitlib.ema": ("vitlib.train.ema",),
    "vitlib.presets": ("vitlib.train.presets",),
    "vitlib.experiments": ("vitlib.studies.experiments", "vitlib.studies.stats"),
    "vitlib.sweep": ("vitlib.studies.sweep",),
    "vitlib.datasize": ("vitlib.studies.datasize", "vitlib.data"),
    "vitlib.flops": ("vitlib.studies.cost",),
    "vitlib.shapes": ("vitlib.studies.cost", "vitlib.studies.timing"),
    "vitlib.bench": ("vitlib.studies.timing",),
    "vitlib.analysis": ("vitlib.studies.embeddings",),
    "vitlib.inspection": ("vitlib.studies.attention_maps", "vitlib.studies.embeddings", "vitlib.studies.reference"),
    "vitlib.probe": ("vitlib.studies.probe",),
    "vitlib.pretrain": ("vitlib.studies.pretrain",),
    "vitlib.finetune": ("vitlib.studies.finetune",),
    "vitlib.plotting": ("vitlib.studies.plotting",),
    "vitlib.notebook": ("vitlib.studies.notebook",),
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the old paths with a module that looks its names up in the new ones."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} is deprecated: its names are now in {' and '.join(new)}.", DeprecationWarning, stacklevel=4
        )
        parts = [importlib.import_module(n) for n in new]
        module = types.ModuleType(spec.name, f"Moved to {', '.join(new)}.")

        def __getattr__(attr):
            for part in parts:
                if hasattr(part, attr):
                    return getattr(part, attr)
            raise AttributeError(f"module {spec.name!r} (now {', '.join(new)}) has no attribute {attr!r}")

        module.__getattr__ = __getattr__
        module.__dir__ = lambda: sorted({a for p in parts for a in dir(p)})
        return module

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())  # before the path finders: an old file left on disk is not used
