"""Supervised training from hcpe files (game records imported with `dlzero import-records`) and hcpe3
files (teacher data from `dlzero teach`), and the warm start of a run from either.

Positions are split by a seeded hash of the position into training and held-out sets
(`train.holdout_fraction`); the model trains `steps` steps on the first and is scored on the second:
policy top-1 accuracy against the recorded move, value accuracy (sign of v against the game result,
decisive games only) and both losses. The targets are those of self-play training: a one-hot
policy for hcpe, the visit counts (a teacher's soft policy) for hcpe3, whose games also give the
history planes, so a supervised model can seed a run or serve as a baseline.

Warm start (`warm_start`, `dlzero loop --init-from`): a run's generation 0 is trained from teacher
data (or copied from a model file) and promoted, so self-play begins from what the teacher knows
instead of a random network; the loop's first generation then trains on from its weights.

A run killed midway resumes from `OUT.ckpt` (same checks and guarantees as the loop's checkpoint);
the file is removed once OUT is written, so the next run with the same OUT starts afresh.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlzero.config import Config, TrainConfig
from dlzero.data.atomic import atomic_write_text
from dlzero.data.hcpe3 import SHARD_SUFFIX, read_hcpe3
from dlzero.errors import ConfigError, DataError, ModelFileError
from dlzero.model import ModelMetadata, PolicyValueNet, load_model_file, model_name, new_model, save_model
from dlzero.rundir import RunDir
from dlzero.train import distributed
from dlzero.train.budget import UNTIMED_STEPS
from dlzero.train.buffer import PositionBuffer
from dlzero.train.checkpoint import load_checkpoint
from dlzero.train.dataset import buffer_from_games, holdout_mask, load_hcpe
from dlzero.train.generation import segment_seed
from dlzero.train.meters import MetricsLog
from dlzero.train.trainer import Segment, Trainer, evaluate


@dataclass
class SupervisedResult:
    """The model written and how it scores."""

    model_path: Path
    steps: int
    train_positions: int
    holdout_positions: int
    train_metrics: dict[str, float]  # last logged interval of training
    holdout: dict[str, float]  # policy_loss, value_loss, policy_acc, value_acc on the held-out set (rank 0)


log = logging.getLogger(__name__)

WARM_START_DIR = "warm-start"  # under the run's train/: the staging model, its checkpoint, metrics, report


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".ckpt")


def load_supervised(paths: Sequence[str | Path], val_lambda: float) -> PositionBuffer:
    """The positions of hcpe and hcpe3 files (told apart by the `.hcpe3` suffix), validated."""
    parts = []
    for path in paths:
        if str(path).endswith(SHARD_SUFFIX):
            parts.append(buffer_from_games(read_hcpe3(path), val_lambda, str(path)))
        else:
            parts.append(load_hcpe([path], val_lambda))
    return PositionBuffer.concat(parts)


def load_matching_model(path: str | Path, cfg: Config) -> tuple[PolicyValueNet, ModelMetadata]:
    """The model file `path`, which must be the config's architecture (`cfg.model`)."""
    model, meta = load_model_file(path)
    if model.cfg != cfg.model:
        raise ModelFileError(f"{path}: is a {model_name(model.cfg)} network but the config asks for "
                             f"{model_name(cfg.model)}: set model.* to match (e.g. --set model.blocks=...)")
    return model, meta


def start_model(init: str | Path | None, cfg: Config) -> PolicyValueNet:
    """A fresh `cfg.model` network, or the weights of the model file `init`."""
    return new_model(cfg.model, seed=cfg.train.seed) if init is None else load_matching_model(init, cfg)[0]


def supervised_train_config(train: TrainConfig) -> TrainConfig:
    """The training settings for teacher data or records: `supervised_value_weight` replaces
    `value_weight` when set (>= 0). A config tuned for self-play (tiny: 0.25, so that a small window's
    results are not memorised) would otherwise underweight the value head on a large labelled set."""
    if train.supervised_value_weight < 0:
        return train
    return dataclasses.replace(train, value_weight=train.supervised_value_weight)


def train_supervised(hcpe: Sequence[str | Path], cfg: Config, out: str | Path, steps: int | None = None,
                     metrics_dir: Path | None = None, progress: bool = True,
                     init: str | Path | None = None, minutes: float | None = None) -> SupervisedResult:
    """Train a fresh `cfg.model` network, or go on training the model file `init` (fine-tuning: a student
    on new teacher labels, usually at a lower `train.lr`), on hcpe/hcpe3 files for `steps` steps, or for
    as many steps as fit in `minutes` (timed on the first steps, dlzero.train.budget); save it to `out`."""
    if minutes is not None and (steps is not None or minutes <= 0):
        raise ConfigError("give the training either in steps or in minutes (> 0), not both")
    out = Path(out)
    info = distributed.current()
    device = distributed.train_device(cfg.train.device, info)
    buf = load_supervised(hcpe, cfg.train.val_lambda)
    held = holdout_mask(buf, cfg.train.holdout_fraction, cfg.train.seed)
    train_buf, hold_buf = buf.subset(np.flatnonzero(~held)), buf.subset(np.flatnonzero(held))
    if not len(train_buf):
        raise DataError(", ".join(map(str, hcpe)), None, f"no training positions ({len(buf)} in all, "
                        f"{len(hold_buf)} held out)")
    ckpt = checkpoint_path(out)
    payload = load_checkpoint(ckpt, cfg.model) if ckpt.is_file() else None
    trainer = Trainer(start_model(init, cfg), supervised_train_config(cfg.train), device, info)
    seed = segment_seed(cfg.train.seed, 0)
    if minutes is not None:
        seg = Segment(0, UNTIMED_STEPS, seed, seconds=minutes * 60.0)
    else:
        seg = Segment(0, steps or cfg.train.steps_per_generation, seed)
    if payload is not None:
        seg = trainer.restore(payload, ckpt)
    metrics = MetricsLog(metrics_dir, trainer.global_step) if metrics_dir and info.is_main else None
    try:
        summary = trainer.fit(train_buf, seg, ckpt, metrics, progress, desc="train (supervised)")
    finally:
        if metrics is not None:
            metrics.close()
    holdout: dict[str, float] = {}
    if info.is_main:
        model = trainer.export_model()
        meta = ModelMetadata(generation=0, parent=Path(init).stem if init else None, positions=len(train_buf),
                             name=model_name(cfg.model))
        save_model(model, out, meta)
        ckpt.unlink(missing_ok=True)
        if len(hold_buf):
            holdout = evaluate(model, hold_buf, cfg.train.batch_size, device)
    return SupervisedResult(out, seg.steps, len(train_buf), len(hold_buf), summary, holdout)


def warm_start(rd: RunDir, cfg: Config, sources: Sequence[str | Path], steps: int | None = None,
               progress: bool = True, minutes: float | None = None) -> Path | None:
    """Make the run's generation 0 from `sources` and promote it; None if the run already has a best model.

    `sources` is one model file (`.pt`, of the run's architecture: copied as generation 0) or hcpe3 /
    hcpe files (a fresh `cfg.model` network trained on them for `steps`, default
    `train.steps_per_generation`, or for `minutes` of training). Training happens under
    `train/warm-start/` and resumes there if
    killed; the model moves into place only when finished, and `train/warm-start/report.json` keeps
    what it was trained on and how it scored on held-out positions.
    """
    best = rd.best()
    if best is not None:
        log.warning("%s already has a best model (generation %d): --init-from is ignored", rd.root, best.generation)
        return None
    sources = [Path(s) for s in sources]
    models = [s for s in sources if s.suffix == ".pt"]
    if models and len(sources) > 1:
        raise ConfigError("--init-from takes one model file (.pt), or teacher data files (.hcpe3, .hcpe), not both")
    target = rd.model_path(0)
    staging_dir = rd.train_dir / WARM_START_DIR
    if target.is_file():  # written by an earlier call that stopped before promoting it
        reason = "warm start (generation 0 already written)"
    elif models:
        model, meta = load_matching_model(models[0], cfg)
        save_model(model, target, ModelMetadata(generation=0, games=meta.games, positions=meta.positions,
                                                name=model_name(cfg.model)))
        reason = f"warm start from the model {models[0]}"
    else:
        staging = staging_dir / target.name
        res = train_supervised(sources, cfg, staging, steps, metrics_dir=staging_dir, progress=progress,
                               minutes=minutes)
        holdout = {k: v for k, v in res.holdout.items() if math.isfinite(v)}  # NaN: a loss with no targets
        atomic_write_text(staging_dir / "report.json", json.dumps(
            {"sources": [str(s) for s in sources], "steps": res.steps, "minutes": minutes,
             "train_positions": res.train_positions,
             "holdout_positions": res.holdout_positions, "holdout": holdout}, indent=1) + "\n")
        os.replace(staging, target)
        log.info("warm start: generation 0 trained %d steps on %d positions; held out (%d): %s", res.steps,
                 res.train_positions, res.holdout_positions,
                 ", ".join(f"{k} {v:.4f}" for k, v in holdout.items()) or "none")
        reason = f"warm start: trained on {', '.join(s.name for s in sources)}"
    rd.set_best(0, reason)
    return target
