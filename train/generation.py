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
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlzero.config import Config
from dlzero.errors import DataError, ModelFileError, RunDirError
from dlzero.model import ModelMetadata, PolicyValueNet, load_model_file, model_name, save_model
from dlzero.rundir import RunDir
from train import distributed
from train.buffer import PositionBuffer
from train.checkpoint import load_checkpoint
from train.dataset import WindowPlan, build_window, load_window
from train.metrics import MetricsLog
from train.trainer import Segment, Trainer

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"


@dataclass
class TrainResult:
    """What one call of `train_generation` produced."""

    generation: int  # the candidate's generation number
    model_path: Path  # rd.model_path(generation), written by rank 0
    parent: str | None  # name of the best model when training began (e.g. "gen-0003")
    steps: int  # steps of this generation (all of them, including any done before a resume)
    global_step: int  # steps since the run's first generation
    window: int  # replay-window size by the formula, in positions
    positions: int  # positions actually trained on (the window, or all data while there is less)
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


def _window(rd: RunDir, cfg: Config, info: distributed.DistInfo) -> tuple[PositionBuffer, WindowPlan]:
    """Rank 0 plans and loads the window; the other ranks load the very same plan."""
    if info.is_main:
        try:
            buf, plan = build_window(rd, cfg.train)
        except Exception as exc:  # tell the other ranks, or they would wait for the plan forever
            distributed.broadcast({"error": str(exc)}, info)
            raise
        distributed.broadcast({"plan": plan.to_dict()}, info)
        return buf, plan
    msg = distributed.broadcast(None, info)
    if "error" in msg:
        raise RunDirError(msg["error"])
    plan = WindowPlan.from_dict(msg["plan"])
    return load_window(rd, plan, cfg.train.val_lambda), plan


def train_generation(rd: RunDir, cfg: Config, steps: int | None = None, progress: bool = True) -> TrainResult:
    """Train the next candidate (or finish an interrupted one) and save it as the next generation.

    `steps` overrides `train.steps_per_generation` for a new generation; an interrupted one keeps
    the step count it started with. Works in a single process or in each process of a torchrun
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
            buf = load_window(rd, plan, cfg.train.val_lambda)
        except DataError as exc:
            log.warning("cannot reload the interrupted generation's window (%s); choosing a new one", exc)
            buf, plan = _window(rd, cfg, info)
            seg.plan = plan.to_dict()
    else:
        generation = (rd.latest_generation() or 0) + 1
        buf, plan = _window(rd, cfg, info)
        best = rd.best()
        seg = Segment(generation, steps or cfg.train.steps_per_generation,
                      segment_seed(cfg.train.seed, generation), plan=plan.to_dict(),
                      parent=Path(best.model).stem if best else None)
    metrics = MetricsLog(rd.metrics_dir, trainer.global_step) if info.is_main else None
    try:
        summary = trainer.fit(buf, seg, ckpt_path, metrics, progress)
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
    return TrainResult(seg.generation, path, seg.parent, seg.steps, trainer.global_step, plan.window,
                       len(buf), plan.total_positions, plan.total_games, resumed, summary)
