"""Shared test setup. Keep it generic: several test modules rely on it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Test helpers (e.g. `randpos`) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Subprocesses started by tests inherit these: never more compute threads than the shared cores allow.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """One intra-op torch thread for the whole session (the test machine's cores are shared)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency, but keep the fixture harmless
        yield
        return
    torch.set_num_threads(1)
    yield
