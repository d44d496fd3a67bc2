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
                   seed: int = 0, min_finished: int = 3, precisions: list[str] | None = None,
                   rounds: int = 1) -> Iterator[dict]:
    """One row per G (and per precision): positions/s, extrapolated games/hour, evaluator share of the wall time.

    With several `precisions` (e.g. fp32 and int8) each G plays `rounds` rounds, every precision in turn
    `moves / rounds` steps from fresh games with the same seed, so each meets the same positions and a
    machine's changing load hits all alike; rows after the first precision give `vs_first`, their
    positions/s divided by the first precision's.
    """
    from dlzero.selfplay.games import play_selfplay_games  # the CLI layer may import selfplay; bench is called from it

    precisions = precisions or [cfg.inference.precision]
    evaluators = {p: make_evaluator(backend, None, replace(cfg, inference=replace(cfg.inference, precision=p)))
                  for p in precisions}
    steps = max(1, -(-moves // rounds))
    try:
        for g in parallels:
            run_cfg = replace(cfg, selfplay=replace(cfg.selfplay, games_in_parallel=g))
            totals = {p: {"moves": 0, "seconds": 0.0, "evaluations": 0, "eval_seconds": 0.0, "lengths": []}
                      for p in precisions}
            for r in range(rounds):
                for p in precisions:
                    stats = play_selfplay_games(evaluators[p], run_cfg, n_games=1 << 30,
                                                on_game_done=lambda _game: None,
                                                rng=np.random.default_rng(seed + r), max_steps=steps)

                    t = totals[p]
                    t["moves"] += stats.moves
                    t["seconds"] += stats.seconds
                    t["evaluations"] += stats.evaluations
                    t["eval_seconds"] += stats.eval_seconds
                    t["lengths"] += list(stats.lengths)
            first = None
            for p in precisions:
                t = totals[p]
                finished = len(t["lengths"]) >= min_finished
                length = float(np.mean(t["lengths"])) if finished else float(cfg.selfplay.max_moves)
                pos_s = t["moves"] / t["seconds"] if t["seconds"] > 0 else 0.0
                row = {"config": cfg_name(cfg), "precision": p, "parallel": g, "positions_per_s": round(pos_s, 1),
                       "games_per_hour": round(3600.0 * pos_s / length, 1), "game_length": round(length, 1),
                       "length_source": "finished games" if finished else "selfplay.max_moves",
                       "evals_per_s": round(t["evaluations"] / t["seconds"], 1) if t["seconds"] > 0 else 0.0,
                       "eval_share": round(t["eval_seconds"] / t["seconds"], 3) if t["seconds"] > 0 else 0.0}
                if first is None:
                    first = pos_s
                elif first > 0:
                    row["vs_first"] = round(pos_s / first, 2)
                yield row
    finally:
        for ev in evaluators.values():
            ev.close()


def cfg_name(cfg: Config) -> str:
    return f"b{cfg.model.blocks}c{cfg.model.channels}"
