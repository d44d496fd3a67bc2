"""Self-play throughput per number of games in lockstep (G).

For each G, a random model of the config's shape plays `moves` lockstep steps (one ply in every
game slot per step). Figures:
- positions_per_s: plies played per second (each ply is one stored position);
- games_per_hour: positions_per_s * 3600 / average game length. A short benchmark finishes few games,
  so the length is the mean of games that did finish when at least `min_finished` did, otherwise the
  config's `selfplay.max_moves` (an upper bound, so games/hour is then a lower bound);
  `length_source` says which;
- eval_share: Evaluator time / wall time (the rest is Python: search, encoding, game bookkeeping).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from dlzero.bench.infer import make_evaluator
from dlzero.config import Config


def bench_selfplay(cfg: Config, parallels: list[int], moves: int, backend: str = "onnx",
                   seed: int = 0, min_finished: int = 3) -> Iterator[dict]:
    """One row per G: positions/s, extrapolated games/hour, evaluator share of the wall time."""
    from selfplay.games import play_games  # the CLI layer may import selfplay; bench is called from it

    evaluator = make_evaluator(backend, None, cfg)
    try:
        for g in parallels:
            run_cfg = replace(cfg, selfplay=replace(cfg.selfplay, games_in_parallel=g))
            stats = play_games(evaluator, run_cfg, n_games=1 << 30, on_game_done=lambda _game: None,
                               rng=np.random.default_rng(seed), max_steps=moves)
            finished = len(stats.lengths) >= min_finished
            length = float(np.mean(stats.lengths)) if finished else float(cfg.selfplay.max_moves)
            pos_s = stats.moves / stats.seconds if stats.seconds > 0 else 0.0
            yield {"config": cfg_name(cfg), "parallel": g, "positions_per_s": round(pos_s, 1),
                   "games_per_hour": round(3600.0 * pos_s / length, 1), "game_length": round(length, 1),
                   "length_source": "finished games" if finished else "selfplay.max_moves",
                   "evals_per_s": round(stats.evaluations / stats.seconds, 1) if stats.seconds > 0 else 0.0,
                   "eval_share": round(stats.eval_seconds / stats.seconds, 3) if stats.seconds > 0 else 0.0}
    finally:
        evaluator.close()


def cfg_name(cfg: Config) -> str:
    return f"b{cfg.model.blocks}c{cfg.model.channels}"
