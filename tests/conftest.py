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


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """A random 1x16 network's .pt file (seed 0), one per test module: the engine, CLI and fault tests need a
    real model file but not a trained one, and the smallest network keeps them quick. A module that needs
    another network defines its own `model`."""
    from dlzero.config import ModelConfig
    from dlzero.model import new_model, save_model

    path = tmp_path_factory.mktemp("model") / "m.pt"
    save_model(new_model(ModelConfig(blocks=1, channels=16), seed=0), path)
    return str(path)
