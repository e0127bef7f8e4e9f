"""Fixtures every test folder shares (tests/ for vitlib, course/tests/, classroom/tests/): the repository on
sys.path, a fixed seed for every test, and one thread for the tiny models."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # vitlib, course and classroom are used from the checkout, installed or not
    sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def one_thread():
    """These models are tiny: one thread is as fast, and immune to a busy machine (two-thread OpenMP runs slow down
    ~50x when another process holds a core, measured on 2 cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
