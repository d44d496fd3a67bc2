"""Supervised training from hcpe files (game records imported with `dlzero import-records`) and hcpe3
files (teacher data from `dlzero teach`), and the warm start of a run from either.

Whole games are held out (`train.holdout_fraction` of them, by a seeded hash of each game: see
train.holdout), or the files of `train.val_files` are the held-out set; the model trains `steps` steps
on the rest and is scored on the held-out positions: policy top-1 accuracy against the recorded move,
value loss and accuracy (sign of v, decisive games only) against the game result alone, as the loop's
held-out validation scores them, and `value_loss_target` against the training target (the result
blended with the teacher's eval). The targets are those of self-play training: a one-hot policy for
hcpe, the visit counts (a teacher's soft policy) for hcpe3, whose games also give the history planes,
so a supervised model can seed a run or serve as a baseline.

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
from dlzero.data.hcpe import read_hcpe
from dlzero.data.hcpe3 import SHARD_SUFFIX, Hcpe3Record, read_hcpe3
from dlzero.errors import ConfigError, DataError, ModelFileError
from dlzero.model import ModelMetadata, PolicyValueNet, load_model_file, model_name, new_model, save_model
from dlzero.rundir import RunDir
from dlzero.train import distributed
from dlzero.train.budget import UNTIMED_STEPS
from dlzero.train.buffer import PositionBuffer
from dlzero.train.dataset import buffer_from_games, buffer_from_hcpe, rows_per_game
from dlzero.train.generation import segment_seed
from dlzero.train.holdout import HoldoutReport, game_keys, record_game_keys, split_games, unseen
from dlzero.train.meters import MetricsLog
from dlzero.train.train_state import load_checkpoint
from dlzero.train.trainer import Segment, Trainer, evaluate


@dataclass
class SupervisedResult:
    """The model written and how it scores."""

    model_path: Path
    steps: int
    train_positions: int
    holdout_positions: int
    train_metrics: dict[str, float]  # last logged interval of training
    holdout: dict[str, float]  # policy_loss, value_loss, policy_acc, value_acc (against the result alone) and
    # value_loss_target (against the blended target) on the held-out set (rank 0)
    split: HoldoutReport | None = None  # what was held out
    holdout_before: dict[str, float] = dataclasses.field(default_factory=dict)  # the `init` model on the same
    # held-out positions before training (fine-tuning's "before"; empty without init)


log = logging.getLogger(__name__)

WARM_START_DIR = "warm-start"  # under the run's train/: the staging model, its checkpoint, metrics, report


def checkpoint_path(out: Path) -> Path:
    return out.with_name(out.name + ".ckpt")


@dataclass
class Labelled:
    """The positions of supervised files, each with the key of its game (train.holdout)."""

    buf: PositionBuffer
    keys: np.ndarray  # uint64 per position
    loose: list[str]  # hcpe files whose records do not follow one another as games


def _load_file(
    path: str | Path, val_lambda: float, capped: str
) -> tuple[PositionBuffer, list[Hcpe3Record] | np.ndarray]:
    """The positions of one hcpe or hcpe3 file (told apart by the `.hcpe3` suffix), validated, and what
    they were read from: the hcpe3 file's games or the hcpe file's records."""
    if str(path).endswith(SHARD_SUFFIX):
        games = read_hcpe3(path)
        return buffer_from_games(games, val_lambda, str(path), capped=capped), games
    records = read_hcpe(path)
    return buffer_from_hcpe(records, val_lambda, capped), records


def load_labelled(paths: Sequence[str | Path], val_lambda: float, capped: str = "drop") -> Labelled:
    """The positions of hcpe and hcpe3 files (told apart by the `.hcpe3` suffix), validated, with their
    games' keys; `capped`: `train.value_of_capped_games`."""
    parts, keys, loose = [], [], []
    for path in paths:
        buf, read = _load_file(path, val_lambda, capped)
        parts.append(buf)
        if isinstance(read, list):  # an hcpe3 file's games
            keys.append(np.repeat(game_keys(read), rows_per_game(read, capped=capped)))
        else:
            run_keys, runs = record_game_keys(read)
            keys.append(run_keys)
            if len(read) >= 2 and runs > len(read) // 2:  # most "games" a record or two long
                loose.append(str(path))
    return Labelled(PositionBuffer.concat(parts), np.concatenate(keys or [np.zeros(0, np.uint64)]), loose)


def load_supervised(paths: Sequence[str | Path], val_lambda: float, capped: str = "drop") -> PositionBuffer:
    """The positions of hcpe and hcpe3 files (told apart by the `.hcpe3` suffix), validated; without the
    games' keys, which only a split by game needs (`load_labelled`)."""
    return PositionBuffer.concat([_load_file(path, val_lambda, capped)[0] for path in paths])


def load_val_files(train: TrainConfig) -> tuple[PositionBuffer, np.ndarray]:
    """The positions of `train.val_files` and the key of each one's game (train.holdout)."""
    val = load_labelled(train.val_files, train.val_lambda, train.value_of_capped_games)
    return val.buf, val.keys


def split_supervised(paths: Sequence[str | Path], train: TrainConfig) -> tuple[PositionBuffer, PositionBuffer,
                                                                                 HoldoutReport]:
    """(training positions, held-out positions, what was held out) of `paths`: whole games held out of them,
    or the files of `train.val_files` as the held-out set (train.holdout); held-out positions that are
    also training positions are left out."""
    train_buf, hold_buf, _, report = split_supervised_keyed(paths, train)
    return train_buf, hold_buf, report


def split_supervised_keyed(paths: Sequence[str | Path], train: TrainConfig) -> tuple[
        PositionBuffer, PositionBuffer, np.ndarray, HoldoutReport]:
    """`split_supervised`, and the key of each held-out position's game: `dlzero score --value-diagnosis` counts
    a game's positions as one sample in its standard errors, since they share the game's result."""
    if train.val_files:  # the training files' game keys are not needed
        train_buf = load_supervised(paths, train.val_lambda, train.value_of_capped_games)
        hold_buf, hold_keys = load_val_files(train)
        games = held_games = len(np.unique(hold_keys))
        source, loose = ", ".join(train.val_files), []
    else:
        data = load_labelled(paths, train.val_lambda, train.value_of_capped_games)
        split = split_games(data.keys, train.holdout_fraction, train.seed)
        train_buf, hold_buf = data.buf.subset(np.flatnonzero(~split.held)), data.buf.subset(np.flatnonzero(split.held))
        hold_keys = data.keys[split.held]
        games, held_games, source, loose = split.games, split.held_games, "by game", data.loose
    scored = unseen(hold_buf, train_buf)
    note = ""
    if loose:
        note = (f"the records of {', '.join(loose)} do not follow one another as games (shuffled?), so held-out "
                "positions have trained game-mates: give a separate held-out file (--val, train.val_files)")
        log.warning("%s", note)
    report = HoldoutReport(source, games, held_games, int(scored.sum()), int((~scored).sum()), note)
    return train_buf, hold_buf.subset(np.flatnonzero(scored)), hold_keys[scored], report


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
    """The training settings for teacher data or records: `supervised_lr_schedule` replaces `lr_schedule`,
    and `supervised_value_weight` replaces `value_weight` when set (>= 0). A config tuned for self-play
    (tiny: value weight 0.25, so that a small window's results are not memorised) would otherwise
    underweight the value head on a large labelled set; and the schedule has a key of its own because a
    warm start's `--set train.lr_schedule=cosine` stayed in the run's config, so every self-play
    generation after it restarted a cosine from the top LR."""
    value_weight = train.value_weight if train.supervised_value_weight < 0 else train.supervised_value_weight
    return dataclasses.replace(train, lr_schedule=train.supervised_lr_schedule, value_weight=value_weight)


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
    train_buf, hold_buf, split = split_supervised(hcpe, cfg.train)
    if not len(train_buf):
        raise DataError(", ".join(map(str, hcpe)), None, f"no training positions ({split})")
    if info.is_main:
        log.info("%s", split)
    ckpt = checkpoint_path(out)
    payload = load_checkpoint(ckpt, cfg.model) if ckpt.is_file() else None
    train_cfg = supervised_train_config(cfg.train)
    if info.is_main:
        log.info("supervised training: LR schedule %s from %g (train.supervised_lr_schedule)",
                 train_cfg.lr_schedule, train_cfg.lr)
    before: dict[str, float] = {}
    if init is not None and info.is_main and len(hold_buf) and payload is None:
        before = evaluate(start_model(init, cfg), hold_buf, cfg.train.batch_size, device)
    trainer = Trainer(start_model(init, cfg), train_cfg, device, info)
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
    return SupervisedResult(out, seg.steps, len(train_buf), len(hold_buf), summary, holdout, split, before)


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
             "lr_schedule": cfg.train.supervised_lr_schedule,
             "train_positions": res.train_positions, "holdout_positions": res.holdout_positions,
             "holdout_split": str(res.split), "holdout": holdout}, indent=1) + "\n")
        os.replace(staging, target)
        log.info("warm start: generation 0 trained %d steps on %d positions; held out (%d): %s", res.steps,
                 res.train_positions, res.holdout_positions,
                 ", ".join(f"{k} {v:.4f}" for k, v in holdout.items()) or "none")
        reason = f"warm start: trained on {', '.join(s.name for s in sources)}"
    rd.set_best(0, reason)
    return target
