"""One generation of the self-play loop: train on the replay window, publish the candidate model.

Training is continuous, as in AlphaGo Zero and KataGo: the weights, optimiser state and EMA carry
over from one generation to the next through `train/checkpoint.pt`, whichever candidate the gate
promotes. The very first generation (no checkpoint yet) starts from the run's best model. Each
generation trains `steps` steps on a window chosen when it starts, then writes
`models/gen-NNNN.pt` (NNNN = the newest model's generation + 1) with metadata: parent = the best
model when training began (whose self-play produced the newest data), games and positions = what
the run had produced.

A generation killed midway resumes from its last checkpoint with the same window (the shard list
is in the checkpoint) and the same batches, so it ends with the weights an uninterrupted run gets.

How long a generation trains: with `train.reuse` > 0 (the default), the steps follow the data, as in
KataGo: each position that arrived since the last generation is sampled `reuse` times on average,
steps = ceil(new positions x reuse / batch_size), between `train.min_steps` and
`train.steps_per_generation` (then a cap). With `reuse` 0, every generation trains the fixed
`train.steps_per_generation`. A fixed count over-trains small generations: 120 steps of 256 on
~4.6k new positions sampled each ~9-14 times over its life in the window, and the value head
memorised its games (held-out value loss above a constant's).

Before the window takes in the new games, they are held out: the newest model and the best are
scored on them (`train.validation`), and each new model on the fixed validation set once it is
written. `train/seen-shards.json` lists the shards some generation's window has already been
planned over, so "new" means exactly the games no model has trained on.

Teacher data (`train.teacher_fraction` > 0) joins each batch but never these sets: its files live
outside data/ (train.teacher_files), so no teacher position is scored as a next game or marked seen.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlzero.config import Config
from dlzero.data.atomic import atomic_write_text
from dlzero.errors import DataError, ModelFileError, RunDirError
from dlzero.model import ModelMetadata, PolicyValueNet, load_model_file, model_name, save_model
from dlzero.rundir import RunDir, generation_name
from dlzero.runfiles import CHECKPOINT_NAME, SEEN_SHARDS
from dlzero.train import distributed
from dlzero.train.buffer import PositionBuffer
from dlzero.train.dataset import WindowPlan, build_window, load_window
from dlzero.train.meters import MetricsLog
from dlzero.train.train_state import load_checkpoint
from dlzero.train.trainer import Segment, Trainer
from dlzero.train.validation import ValidationLog, fixed_set, held_out, read_games, validate_models

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What one call of `train_generation` produced."""

    generation: int  # the candidate's generation number
    model_path: Path  # rd.model_path(generation), written by rank 0
    parent: str | None  # name of the best model when training began (e.g. "gen-0003")
    steps: int  # steps of this generation (all of them, including any done before a resume)
    global_step: int  # steps since the run's first generation
    window: int  # replay-window size by the formula, in positions
    positions: int  # self-play positions trained on (the window, or all data while there is less)
    total_positions: int  # training positions in all the run's shards
    total_games: int
    resumed: bool  # continued an interrupted generation
    metrics: dict[str, float] = field(default_factory=dict)  # last logged interval: losses, accuracies, lr


def segment_seed(seed: int, generation: int) -> int:
    """Sampler seed of a generation: differs per generation, fixed by the config seed."""
    return int(np.random.SeedSequence([seed, generation]).generate_state(1)[0])


def _initial_model(rd: RunDir, cfg: Config) -> PolicyValueNet:
    best = rd.best()
    if best is None:
        raise RunDirError(f"{rd.root}: no model to train from (models/best.json is missing); "
                          "create generation 0 first (`dlzero loop` does, or `dlzero init-model` + promote)")
    path = rd.best_model_path()
    model, _ = load_model_file(path)
    if model.cfg != cfg.model:
        raise ModelFileError(f"{path}: is a {model_name(model.cfg)} network but the config asks for "
                             f"{model_name(cfg.model)}")
    return model


def _window(rd: RunDir, cfg: Config, info: distributed.DistInfo,
            shards: list[Path] | None = None) -> tuple[PositionBuffer, WindowPlan]:
    """Rank 0 plans and loads the window (over `shards`, default all); the other ranks load the same plan."""
    if info.is_main:
        try:
            buf, plan = build_window(rd, cfg.train, shards)
        except Exception as exc:  # tell the other ranks, or they would wait for the plan forever
            distributed.broadcast({"error": str(exc)}, info)
            raise
        distributed.broadcast({"plan": plan.to_dict()}, info)
        return buf, plan
    msg = distributed.broadcast(None, info)
    if "error" in msg:
        raise RunDirError(msg["error"])
    plan = WindowPlan.from_dict(msg["plan"])
    return load_window(rd, plan, cfg.train.val_lambda, value_plies=cfg.train.value_plies,
                       capped=cfg.train.value_of_capped_games), plan


def steps_for(new_positions: int, cfg: Config, teacher_per_batch: int = 0) -> int:
    """Steps of a new generation: `reuse` samples per new position, clipped (see the module docstring).

    Teacher positions in each batch (`teacher_per_batch`) leave fewer self-play samples per step, so
    the steps grow to keep `reuse` samples of each new self-play position.
    """
    t = cfg.train
    if t.reuse <= 0:
        return t.steps_per_generation
    wanted = math.ceil(new_positions * t.reuse / (t.batch_size - teacher_per_batch))
    return max(t.min_steps, min(t.steps_per_generation, wanted))


def seen_shards(rd: RunDir) -> set[str]:
    """Shards (relative to data/) that some generation's window was planned over: not new any more."""
    data = rd.read_json(f"{rd.train_dir.name}/{SEEN_SHARDS}", []) or []
    return {str(x) for x in data} if isinstance(data, list) else set()


def _validate_new_games(rd: RunDir, cfg: Config, generation: int, step: int, device) -> list[Path]:
    """Score the newest model and the best on the games no generation has trained on, then mark them seen.

    Runs on rank 0 before a new generation plans its window; returns the shards it listed, the ones the
    window may use. Validation never stops training: an error is logged and training goes on.
    """
    shards = rd.shards()
    seen = seen_shards(rd)
    new = [p for p in shards if p.relative_to(rd.data_dir).as_posix() not in seen]
    try:
        if new and cfg.train.validation_positions:
            held = held_out("next", f"+{generation_name(generation)}", read_games(new),
                            cfg.train.validation_positions, seed=generation, capped=cfg.train.value_of_capped_games)
            models = []
            latest = rd.latest_generation()
            if latest is not None:
                models.append((generation_name(latest), rd.model_path(latest)))
            best = rd.best()
            if best is not None and best.generation != latest:
                models.append((generation_name(best.generation), rd.root / best.model))
            validate_models(models, [held], ValidationLog(rd.metrics_dir), step, device)
    except Exception as exc:  # a figure is not worth a lost generation
        log.warning("held-out validation on the new games failed: %s", exc)
    names = sorted(seen | {p.relative_to(rd.data_dir).as_posix() for p in shards})
    atomic_write_text(rd.train_dir / SEEN_SHARDS, json.dumps(names, indent=0) + "\n")
    return shards


def validate_on_fixed_set(rd: RunDir, cfg: Config, generation: int, step: int, device) -> None:
    """Score generation `generation`'s model on the fixed validation set (once; errors are only logged)."""
    if not (cfg.train.validation_set and cfg.train.validation_positions):
        return
    try:
        held = fixed_set(cfg.train.validation_set, cfg.train.validation_positions, cfg.train.value_of_capped_games)
        if held is not None:
            validate_models([(generation_name(generation), rd.model_path(generation))], [held],
                            ValidationLog(rd.metrics_dir), step, device)
    except Exception as exc:
        log.warning("held-out validation on the fixed set failed: %s", exc)


def train_generation(rd: RunDir, cfg: Config, steps: int | None = None, progress: bool = True) -> TrainResult:
    """Train the next candidate (or finish an interrupted one) and save it as the next generation.

    `steps` overrides the step count of a new generation (else `steps_for` the new data); an
    interrupted one keeps the step count it started with. Works in a single process or in each process of a torchrun
    launch (the process group must already be initialised: see `train.distributed.init_from_env`).
    """
    info = distributed.current()
    device = distributed.train_device(cfg.train.device, info)
    ckpt_path = rd.train_dir / CHECKPOINT_NAME
    payload = load_checkpoint(ckpt_path, cfg.model) if ckpt_path.is_file() else None
    model = PolicyValueNet(cfg.model) if payload is not None else _initial_model(rd, cfg)
    trainer = Trainer(model, cfg.train, device, info)
    seg = trainer.restore(payload, ckpt_path) if payload is not None else None
    resumed = seg is not None and not seg.done
    if resumed:
        log.info("resuming generation %d at step %d of %d", seg.generation, seg.step, seg.steps)
        plan = WindowPlan.from_dict(seg.plan)
        try:
            buf = load_window(rd, plan, cfg.train.val_lambda, value_plies=cfg.train.value_plies,
                              capped=cfg.train.value_of_capped_games)
        except DataError as exc:
            log.warning("cannot reload the interrupted generation's window (%s); choosing a new one", exc)
            buf, plan = _window(rd, cfg, info)
            seg.plan = plan.to_dict()
    else:
        generation = (rd.latest_generation() or 0) + 1
        listed = _validate_new_games(rd, cfg, generation, trainer.global_step, device) if info.is_main else None
        buf, plan = _window(rd, cfg, info, listed)
        best = rd.best()
        before = int((seg.plan or {}).get("total_positions", 0)) if seg is not None else 0
        teacher = plan.teacher_per_batch(cfg.train.batch_size)
        if steps is None:
            steps = steps_for(plan.total_positions - before, cfg, teacher)
            log.info("generation %d: %d new positions x reuse %g -> %d steps", generation,
                     plan.total_positions - before, cfg.train.reuse, steps)
        if teacher:
            log.info("generation %d: %d of each batch of %d from %d teacher positions (%s)", generation, teacher,
                     cfg.train.batch_size, len(buf) - plan.window_positions, ", ".join(e for e, _ in plan.teacher))
        seg = Segment(generation, steps,
                      segment_seed(cfg.train.seed, generation), plan=plan.to_dict(),
                      parent=Path(best.model).stem if best else None)
    if info.is_main:  # the run's own schedule: a warm start's is train.supervised_lr_schedule
        log.info("generation %d: LR schedule %s from %g (train.lr_schedule)", seg.generation,
                 cfg.train.lr_schedule, cfg.train.lr)
    metrics = MetricsLog(rd.metrics_dir, trainer.global_step) if info.is_main else None
    try:
        summary = trainer.fit(buf, seg, ckpt_path, metrics, progress, sampler=plan.sampler(seg.seed))
    finally:
        if metrics is not None:
            metrics.close()
    path = rd.model_path(seg.generation)
    if info.is_main:
        meta = ModelMetadata(generation=seg.generation, parent=seg.parent, games=plan.total_games,
                             positions=plan.total_positions, name=model_name(cfg.model))
        save_model(trainer.export_model(), path, meta)
    seg.done = True
    trainer.save(ckpt_path, seg)  # collective: also keeps the other ranks until the model is written
    if info.is_main:
        validate_on_fixed_set(rd, cfg, seg.generation, trainer.global_step, device)
    return TrainResult(seg.generation, path, seg.parent, seg.steps, trainer.global_step, plan.window,
                       plan.window_positions, plan.total_positions, plan.total_games, resumed, summary)
