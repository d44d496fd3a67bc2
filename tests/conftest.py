"""Shared test setup, and the one home of the tests' fixtures: a fixture two modules need is defined here, not
copied into each (nor imported from another test module, where pytest sees it twice). Plain helpers stay in
the helper modules beside the tests (`piped`, `tmpfs`, `fake_teacher`, `shards`, ...), imported as functions.
Keep it generic: several test modules rely on it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test helpers (e.g. `randpos`) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_teacher import FAKE_ENGINE  # noqa: E402 (beside the tests: importable once the path is set)
from piped import Piped, is_line  # noqa: E402
from tmpfs import namespaces_work  # noqa: E402

# Subprocesses started by tests inherit these: never more compute threads than the shared cores allow.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

# The tests' network: one residual block of 16 channels, a value head of 2 channels and 16 units, the smallest
# that is still the real architecture, so a test that needs a real (untrained) network stays quick. Written
# once: a test config takes its model from here (`TINY_MODEL_SETS`: as `--set` or `load_config` overrides).
TINY_MODEL = {"blocks": 1, "channels": 16, "value_channels": 2, "value_fc": 16}
TINY_MODEL_SETS = [f"model.{key}={value}" for key, value in TINY_MODEL.items()]
TINY_MODEL_FLAGS = [word for override in TINY_MODEL_SETS for word in ("--set", override)]  # for a command line


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
    """A random `TINY_MODEL` network's .pt file (seed 0), one per test module: the engine, CLI and fault tests
    need a real model file but not a trained one, and the smallest network keeps them quick."""
    from dlzero.config import ModelConfig
    from dlzero.model import new_model, save_model

    path = tmp_path_factory.mktemp("model") / "m.pt"
    save_model(new_model(ModelConfig(**TINY_MODEL), seed=0), path)
    return str(path)


@pytest.fixture()
def usi(model: str) -> Iterator[Piped]:
    """The real `dlzero usi` on pipes with the `model` network and one search thread, ready (`isready`
    answered); told `quit` at the end, killed if it lingers."""
    gui = Piped("usi", "--model", model, "--threads", "1")
    gui.send("isready")
    gui.wait(is_line("readyok"))
    yield gui
    gui.end("quit")


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> str:
    """The teacher spec head of the fake USI teacher (tests/fake_teacher.py): `usi:PYTHON SCRIPT`."""
    script = tmp_path_factory.mktemp("engine") / "fake_usi.py"
    script.write_text(FAKE_ENGINE)
    return f"usi:{sys.executable} {script}"


@pytest.fixture(scope="module")
def tmpfs_ok(tmp_path_factory) -> None:
    """Skips the test where no private tmpfs can be mounted (tests/tmpfs.py: the full-disk tests need one)."""
    why = namespaces_work(tmp_path_factory.mktemp("probe") / "mnt")
    if why:
        pytest.skip(f"needs a private tmpfs: {why}")


@pytest.fixture()
def none_shipped(tmp_path, monkeypatch) -> Path:
    """A networks folder with no network in it (DLZERO_NETWORKS pointed at it): what a user has with none."""
    from dlzero.networks import ENV_DIR

    folder = tmp_path / "no-networks"
    folder.mkdir()
    monkeypatch.setenv(ENV_DIR, str(folder))
    return folder


def opening_key(game) -> str:
    """The position a match game left its opening in (its start, then its `opening_plies` moves), as
    `dlzero.play.openings.position_key` names it: tests that check a match's openings compare these."""
    import cshogi

    from dlzero.play.openings import position_key

    board = cshogi.Board(game.start_sfen)
    for move in game.moves[: game.opening_plies]:
        board.push(move)
    return position_key(board)
