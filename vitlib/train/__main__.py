"""python -m vitlib.train: the training loop from the command line (see vitlib.train.cli)."""

import sys

from .cli import main

sys.exit(main())
