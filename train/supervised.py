"""Supervised training from hcpe files (e.g. game records imported with `dlzero import-records`).

Positions are split by a seeded hash of the position into training and held-out sets
(`train.holdout_fraction`); the model trains `steps` steps on the first and is scored on the second:
policy top-1 accuracy against the recorded move, value accuracy (sign of v against the game result,
decisive games only) and both losses. The targets are those of self-play training with a one-hot
policy, so a supervised model can seed a run or serve as a baseline.

A run killed midway resumes from `OUT.ckpt` (same checks and guarantees as the loop's checkpoint);
the file is removed once OUT is written, so the next run with the same OUT starts afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlzero.config import Config
from dlzero.errors import DataError
from dlzero.model import ModelMetadata, model_name, new_model, save_model
from train import distributed
from train.checkpoint import load_checkpoint
from train.dataset import holdout_mask, load_hcpe
from train.generation import segment_seed
from train.metrics import MetricsLog
from train.trainer import Segment, Trainer, evaluate


@dataclass
class SupervisedResult:
    """The model written and how it scores."""

    model_path: Path
    steps: int
    train_positions: int
    holdout_positions: int
    train_metrics: dict[str, float]  # last logged interval of training
    holdout: dict[str, float]  # policy_loss, value_loss, policy_acc, value_acc on the held-out set (rank 0)


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".ckpt")


def train_supervised(hcpe: Sequence[str | Path], cfg: Config, out: str | Path, steps: int | None = None,
                     metrics_dir: Path | None = None, progress: bool = True) -> SupervisedResult:
    """Train a fresh `cfg.model` network on `hcpe` files for `steps` steps; save it to `out`."""
    out = Path(out)
    info = distributed.current()
    device = distributed.train_device(cfg.train.device, info)
    buf = load_hcpe(hcpe, cfg.train.val_lambda)
    held = holdout_mask(buf, cfg.train.holdout_fraction, cfg.train.seed)
    train_buf, hold_buf = buf.subset(np.flatnonzero(~held)), buf.subset(np.flatnonzero(held))
    if not len(train_buf):
        raise DataError(", ".join(map(str, hcpe)), None, f"no training positions ({len(buf)} in all, "
                        f"{len(hold_buf)} held out)")
    ckpt = checkpoint_path(out)
    payload = load_checkpoint(ckpt, cfg.model) if ckpt.is_file() else None
    trainer = Trainer(new_model(cfg.model, seed=cfg.train.seed), cfg.train, device, info)
    seg = Segment(0, steps or cfg.train.steps_per_generation, segment_seed(cfg.train.seed, 0))
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
        meta = ModelMetadata(generation=0, parent=None, positions=len(train_buf), name=model_name(cfg.model))
        save_model(model, out, meta)
        ckpt.unlink(missing_ok=True)
        if len(hold_buf):
            holdout = evaluate(model, hold_buf, cfg.train.batch_size, device)
    return SupervisedResult(out, seg.steps, len(train_buf), len(hold_buf), summary, holdout)
