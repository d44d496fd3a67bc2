"""Scoring model files on held-out games, after the fact: `dlzero score`.

`dlzero train --hcpe` prints the held-out figures of the model it wrote, once. Comparing two networks needs
both scored on one set of positions: when a third teacher file joined the training files, the hold-out grew
with it, and the older network's figures no longer compared with the newer one's. `held_out` rebuilds the
split a training run made from its files and settings (`train.holdout_fraction`, `train.seed`; the split is a
seeded hash of each game, train.holdout, so the same files give the same games whatever their order), or
takes `train.val_files` whole, and `score_model` scores any model file on it with the trainer's own
`evaluate`, so the figures are those training printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from dlzero.config import TrainConfig
from dlzero.errors import ConfigError, DataError
from dlzero.model import load_model_file
from dlzero.train.buffer import PositionBuffer
from dlzero.train.holdout import HoldoutReport
from dlzero.train.supervised import load_val_files, split_supervised
from dlzero.train.trainer import evaluate

FIGURES = ("policy_loss", "policy_acc", "value_loss", "value_acc", "value_loss_target")


def held_out(hcpe: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, HoldoutReport]:
    """The positions a supervised run on `hcpe` with these settings held out, and what they are.

    With `train.val_files` and no training files, every position of the validation files is scored (nothing
    is known to have trained on them); with both, those that are also training positions are left out, as
    training leaves them out."""
    if not hcpe and not train.val_files:
        raise ConfigError("nothing to score on: give the training files (--hcpe) whose held-out games to rebuild, "
                          "or held-out files (--val)")
    if hcpe:
        _, hold, report = split_supervised(hcpe, train)
    else:
        hold, games = load_val_files(train)
        report = HoldoutReport(", ".join(train.val_files), games, games, len(hold), 0)
    if not len(hold):
        raise DataError(", ".join(map(str, hcpe or train.val_files)), None, f"no held-out positions ({report})")
    return hold, report


def score_model(path: str | Path, hold: PositionBuffer, batch_size: int, device: torch.device) -> dict[str, float]:
    """`evaluate`'s figures for the `.pt` model file `path` on `hold`: whatever its architecture, since a
    model file carries its own."""
    model, _ = load_model_file(path)
    return evaluate(model, hold, batch_size, device)
