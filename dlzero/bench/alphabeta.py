"""`dlzero bench alphabeta`: speed of the classical reference anchor, and how each rung fares against random.

Each rung (`alphabeta:N`) plays colour-swapped games against the random mover from the gate's openings;
the time spent inside its move choice gives positions/s and ms per move on the positions games really
reach, and the results say how far above the floor (random = Elo 0) the rung stands.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import cshogi

from dlzero.config import Config
from dlzero.gating.alphabeta import AlphaBeta
from dlzero.gating.anchors import RandomMover
from dlzero.gating.elo_fit import GameResult, fit_ratings
from selfplay.arena import play_match


class _Timed:
    """Wraps a rung and adds up the time spent choosing moves."""

    def __init__(self, inner: AlphaBeta) -> None:
        self.inner, self.name = inner, inner.name
        self.seconds, self.moves = 0.0, 0

    def choose(self, boards: Sequence[cshogi.Board]) -> list[int | None]:
        t0 = time.perf_counter()
        out = self.inner.choose(boards)
        self.seconds += time.perf_counter() - t0
        self.moves += len(boards)
        return out


def bench_alphabeta(cfg: Config, budgets: list[int], games: int, seed: int = 0) -> list[dict]:
    """One row per rung: games against random (W-D-L, score, fitted Elo), nodes/s, ms per move."""
    rows = []
    for nodes in budgets:
        rung = _Timed(AlphaBeta(nodes))
        result = play_match(rung, RandomMover(seed), games, cfg, parallel=games, seed=seed,
                            names=(rung.name, "random"))
        fit = fit_ratings([GameResult(rung.name, "random", g.score_a) for g in result.games]).by_player()
        rows.append({"rung": rung.name, "games": result.n_games,
                     "wdl_vs_random": f"{result.wins}-{result.draws}-{result.losses}",
                     "score": round(result.score, 3), "elo_vs_random": round(fit[rung.name].elo),
                     "nodes_per_s": round(rung.inner.total_nodes / max(rung.seconds, 1e-9)),
                     "ms_per_move": round(1000 * rung.seconds / max(rung.moves, 1), 2),
                     "mean_plies": round(sum(len(g.moves) for g in result.games) / max(result.n_games, 1))})
    return rows
