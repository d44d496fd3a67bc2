"""The first model of a run: a random generation 0, promoted so that self-play has a best model.

Runs once per run directory, in whichever process starts self-play first (the CLI, the loop, the
Ray driver); workers never create models.
"""

from __future__ import annotations

from dlzero.config import Config
from dlzero.model import ModelMetadata, model_name, new_model, save_model
from dlzero.rundir import RunDir


def ensure_best_model(rd: RunDir, cfg: Config, seed: int | None = None) -> int:
    """The best generation; a fresh run gets a random generation-0 model promoted first."""
    best = rd.best()
    if best is not None:
        return best.generation
    if not rd.model_path(0).is_file():
        save_model(new_model(cfg.model, seed=seed), rd.model_path(0),
                   ModelMetadata(generation=0, name=model_name(cfg.model)))
    return rd.set_best(0, "random initial model").generation
