"""`dlzero bench alphabeta`: speed of the classical reference anchor, and how strong each rung is.

Each rung (`alphabeta:N`) plays colour-swapped games against the random mover and against the rung
before it, from the gate's openings; the time spent inside its move choice gives positions/s and ms per
move on the positions games really reach, and one rating fit over all these games (random = 0, one
virtual draw per pair) places the rungs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from dlzero.config import Config
from dlzero.gating.elo_fit import GameResult, fit_ratings
from dlzero.gating.match import play_match
from dlzero.play import Game, RandomMover
from dlzero.play.alphabeta import AlphaBeta


class _Timed:
    """Wraps a rung and adds up the time spent choosing moves."""

    def __init__(self, inner: AlphaBeta) -> None:
        self.inner, self.name = inner, inner.name
        self.seconds, self.moves = 0.0, 0

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        t0 = time.perf_counter()
        out = self.inner.choose(games)
        self.seconds += time.perf_counter() - t0
        self.moves += len(games)
        return out


def bench_alphabeta(cfg: Config, budgets: list[int], games: int, seed: int = 0) -> list[dict]:
    """One row per rung: games against random and against the previous rung (W-D-L), its Elo from one
    fit over all these games (random = 0), positions/s and ms per move."""
    rows, results, previous = [], [], None
    for nodes in budgets:
        rung = _Timed(AlphaBeta(nodes))
        vs_random = play_match(rung, RandomMover(seed), games, cfg, parallel=games, seed=seed,
                               names=(rung.name, "random"))
        results += [GameResult(rung.name, "random", g.score_a) for g in vs_random.games]
        row = {"rung": rung.name, "wdl_vs_random": f"{vs_random.wins}-{vs_random.draws}-{vs_random.losses}",
               "wdl_vs_previous": ""}
        if previous is not None:
            vs_prev = play_match(rung, previous, games, cfg, parallel=games, seed=seed,
                                 names=(rung.name, previous.name))
            results += [GameResult(rung.name, previous.name, g.score_a) for g in vs_prev.games]
            row["wdl_vs_previous"] = f"{vs_prev.wins}-{vs_prev.draws}-{vs_prev.losses}"
        row.update({"nodes_per_s": round(rung.inner.total_nodes / max(rung.seconds, 1e-9)),
                    "ms_per_move": round(1000 * rung.seconds / max(rung.moves, 1), 2),
                    "mean_plies": round(sum(len(g.moves) for g in vs_random.games) / max(vs_random.n_games, 1))})
        rows.append(row)
        previous = AlphaBeta(nodes)
    fit = fit_ratings(results).by_player()
    for row in rows:
        r = fit[row["rung"]]
        row["elo"] = f"{r.elo:+.0f} [{r.elo_low:+.0f}, {r.elo_high:+.0f}]"
    return rows
