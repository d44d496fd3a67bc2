"""The learning loop: self-play -> train -> gate -> promote, generation after generation.

`gate.mode` decides which candidates play a gate match (`gate_due`): all (sprt), none (off: each
candidate becomes the best at once, as in AlphaZero and dlshogi, so self-play always uses the
latest model), or every N-th generation (every-N). An ungated promotion plays no games and writes
no ratings.csv row; `dlzero rate` can still place any generation on the anchored scale.

Progress is kept in `runs/NAME/loop.json` (written atomically after each phase), so Ctrl-C or a
crash at any point and the same command again continues where it stopped: a finished phase is
never redone, the trainer resumes from its checkpoint, and self-play only tops up the games the
current iteration still lacks.

With `rate.loop`, a promoted candidate is also rated against the anchor pool (`dlzero rate`, topped
up to `rate.games` per pairing, every `rate.every`-th promotion), so `progress.png` and
`metrics/elo.csv` follow the run on the anchored scale.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from dlzero.config import Config, gate_interval
from dlzero.rundir import RunDir, generation_name

log = logging.getLogger("dlzero.loop")

PHASES = ("selfplay", "train", "gate", "rate")


@dataclass
class LoopState:
    """Where the loop stands: iteration number, next phase, and what the iteration produced."""

    iteration: int = 0
    phase: str = "selfplay"
    games_done: int = 0
    candidate: int | None = None

    @classmethod
    def load(cls, rd: RunDir) -> LoopState:
        data = rd.read_json("loop.json", {}) or {}
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def save(self, rd: RunDir) -> None:
        rd.write_json("loop.json", vars(self))


def gate_due(mode: str, generation: int) -> bool:
    """Whether candidate `generation` plays a gate match under `gate.mode` (else it is promoted)."""
    interval = gate_interval(mode)
    return interval is not None and generation % interval == 0


def run_loop(rd: RunDir, cfg: Config, generations: int, progress: bool = True) -> None:
    """Run `generations` more iterations (each: self-play, train a candidate, gate it)."""
    from dlzero.gating.promotion import gate_and_promote
    from dlzero.gating.rating import promoted_generations, rate
    from dlzero.metrics.plots import plot_progress
    from selfplay.bootstrap import ensure_best_model
    from selfplay.session import run_selfplay
    from train.generation import train_generation

    ensure_best_model(rd, cfg, cfg.train.seed)
    _ensure_int8(rd.best_model_path(), cfg)
    state = LoopState.load(rd)
    stop_at = state.iteration + generations
    while state.iteration < stop_at:
        t0 = time.perf_counter()
        best = rd.best()
        if state.phase == "selfplay":
            wanted = cfg.selfplay.games_per_generation - state.games_done
            if wanted > 0:
                summary = run_selfplay(rd, cfg, wanted, cfg.selfplay.workers, progress=progress)
                state.games_done += summary.games
            state.phase = "train"
            state.save(rd)
        if state.phase == "train":
            result = train_generation(rd, cfg, progress=progress)
            state.candidate = result.generation
            _ensure_int8(rd.model_path(result.generation), cfg)
            state.phase = "gate"
            state.save(rd)
        if state.phase == "gate":
            if gate_due(cfg.gate.mode, state.candidate):
                gate = gate_and_promote(rd, cfg, state.candidate, progress=progress, report=False,
                                        parallel=cfg.gate.games_in_parallel)
                verdict = "promoted" if gate.promoted else "kept best"
                line = (f"candidate gen {state.candidate} vs best gen {best.generation}: "
                        f"{gate.wins}-{gate.draws}-{gate.losses}, score {gate.score:.3f}, Elo {gate.elo:+.0f} "
                        f"[{gate.elo_low:+.0f}, {gate.elo_high:+.0f}] -> {verdict}")
            else:
                rd.set_best(state.candidate, f"gate.mode {cfg.gate.mode}: promoted without a gate match")
                line = f"candidate gen {state.candidate} promoted without a gate match (gate.mode {cfg.gate.mode})"
            minutes = (time.perf_counter() - t0) / 60.0
            print(f"[iteration {state.iteration}] {line} ({minutes:.1f} min)", flush=True)
            state.phase = "rate"
            state.save(rd)
        if state.phase == "rate":
            best_now = rd.best()
            promoted = best_now is not None and best_now.generation == state.candidate
            if cfg.rate.loop and promoted and (len(promoted_generations(rd, cfg.gate.mode)) - 1) % cfg.rate.every == 0:
                rated = rate(rd, cfg, [state.candidate], progress=progress).ratings
                mine = rated.by_player().get(generation_name(state.candidate)) if rated else None
                if mine is not None:
                    print(f"[iteration {state.iteration}] gen {state.candidate} anchored Elo {mine.elo:+.0f} "
                          f"[{mine.elo_low:+.0f}, {mine.elo_high:+.0f}] over {mine.games} games", flush=True)
            plot_progress(rd)
            state = LoopState(iteration=state.iteration + 1)
            state.save(rd)


def _ensure_int8(model: Path, cfg: Config) -> None:
    """With `inference.precision: int8`, quantize a new model once here (calibrated on the run's newest
    self-play), rather than in each self-play worker or gating side that loads it."""
    if cfg.inference.precision == "int8":
        from dlzero.inference.int8 import ensure_int8

        ensure_int8(model, cfg.inference.quantize)
