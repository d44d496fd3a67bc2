"""The Player: a position and limits in, the best move and its analysis out.

It owns one search tree, reuses the subtree of the moves played since the last call, checks the
root for a declaration win or a short mate before searching, manages time, and reports progress
through a callback (the USI loop turns those into `info` lines).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import cshogi
import numpy as np

from dlzero.config import MATE_MOVE_MAX_PLIES, Config
from dlzero.engine.layout import engine_config
from dlzero.engine.timeman import Limits, allocate, can_stop_early, is_critical
from dlzero.game_end import END_DECLARATION, END_MATE, GameRules, game_end
from dlzero.inference.base import Evaluator
from dlzero.position import start_position
from dlzero.search import (
    MoveStat,
    Search,
    Tree,
    find_mate,
    mate_distance,
    move_stats,
    principal_variation,
    root_winrate,
    winrate_to_cp,
)
from dlzero.search.mate import MateSolver

# The search asks whether to stop once a step (collect leaves, take the oldest batch back, back up);
# after it says yes, the batches in flight are still drained. Both take about a step, so the hard
# limit is kept that many steps ahead. Measured on 2 loaded cores (load 8, byoyomi 1000, margin 300,
# 5x64 network): the stop came up to 125 ms past the 700 ms limit and the drain took up to 180 ms,
# about one longest step each; over a 20-game shogiarena match against Fairy-Stockfish on the same
# cores two moves took 1.6 s and lost on time.
HARD_STOP_STEPS = 2
# That was measured with two batches in flight; with more streams (EvalStreams, up to 64) the leaves in
# flight beyond those take, to drain after the stop, their number over this search's rate, kept ahead too.
# A step is also the finest grain at which a search sees `stop`, so its length is bounded whatever
# BatchSize and EvalStreams say: the leaves of one step (a batch per stream) are cut to what the
# last search's speed evaluates in STEP_MS (an eighth of the hard limit when that is shorter), never
# below MIN_STEP_LEAVES; before any search was timed, to FIRST_STEP_LEAVES (the default BatchSize).
# Unbounded, BatchSize 4096 made one step of a 1 s byoyomi move take 7 s on 2 cores.
STEP_MS = 100.0
MIN_STEP_LEAVES = 8
FIRST_STEP_LEAVES = 64
# A root mate search deeper than MATE_MOVE_MAX_PLIES goes on with df-pn in a helper process
# (dlzero.search.mate) for at most ROOT_MATE_SHARE of the move's target time, or ROOT_MATE_SECONDS
# without a clock (`go nodes`, `go infinite`, analysis), and ROOT_MATE_NODES df-pn nodes (a node
# costs cshogi about 0.4 KB of memory); `stop` ends it at once.
ROOT_MATE_SHARE = 0.3
ROOT_MATE_SECONDS = 1.0
ROOT_MATE_NODES = 1_000_000
# The most playouts a search is asked for (USI's `Playouts` and `go nodes`, analysis' `maxVisits`): larger
# requests are cut to it. A tree stops growing at `search.node_limit` long before.
MAX_PLAYOUTS = 1_000_000_000
# Gumbel's Sequential Halving needs its budget up front: by time, the first search of an engine whose
# speed is not yet measured gets this many playouts (a guess, not `search.playouts`, which counts
# playouts of searches without a clock).
FIRST_GUMBEL_PLAYOUTS = 800


@dataclass
class Analysis:
    """What a search found. `bestmove` is a USI move, `resign` or `win` (declaration)."""

    bestmove: str
    ponder: str | None = None
    pv: list[str] = field(default_factory=list)
    winrate: float = 0.5
    score_cp: int = 0
    mate: int | None = None       # plies to mate: > 0 we mate, < 0 we are mated
    moves: list[MoveStat] = field(default_factory=list)
    nodes: int = 0
    playouts: int = 0
    time_ms: int = 0
    nps: float = 0.0

    def to_dict(self, multipv: int | None = None) -> dict:
        """Plain data for JSON output."""
        top = self.moves if multipv is None else self.moves[:multipv]
        return {
            "bestmove": self.bestmove, "ponder": self.ponder, "pv": self.pv,
            "winrate": round(self.winrate, 4), "score_cp": self.score_cp, "mate": self.mate,
            "nodes": self.nodes, "playouts": self.playouts, "time_ms": self.time_ms, "nps": round(self.nps, 1),
            "moves": [{"move": m.usi, "visits": m.visits, "winrate": round(m.winrate, 4),
                       "prior": round(m.prior, 4)} for m in top],
        }


class Player:
    """Search-backed move choice for one game at a time (USI, CLI, Python API)."""

    def __init__(self, evaluator: Evaluator, cfg: Config, mate: MateSolver | None = None) -> None:
        self.evaluator = evaluator
        self.cfg = cfg
        self.mate = mate or MateSolver()  # deep root mate searches and the mate guard (its helper starts on first use)
        self.search = Search(evaluator, engine_config(cfg, evaluator).search)  # `cfg` as given stays `self.cfg`
        self.tree: Tree | None = None
        self._start_sfen: str | None = None
        self._moves: list[int] = []
        self._ponder_start: float | None = None
        self.resign_threshold = cfg.usi.resign_threshold
        self._rate: float | None = None  # playouts per ms of the last search (Gumbel budgets, step sizes)
        self._restricted = False  # the tree's root holds only a `go searchmoves` list

    # -- position and tree reuse ----------------------------------------------------------------
    def set_position(self, board: cshogi.Board) -> None:
        """Search from `board` next; keep the subtree if it follows the previous position."""
        moves = list(board.history)
        start_sfen = start_position(board)
        reusable = (self.tree is not None and self.cfg.search.reuse_tree and start_sfen == self._start_sfen
                    and moves[: len(self._moves)] == self._moves and not self._restricted)
        if reusable:
            for move in moves[len(self._moves):]:
                self.tree.advance(move)
        else:
            self.tree = Tree(_copy_board(board))
            self._restricted = False
        self._start_sfen, self._moves = start_sfen, moves
        self._ponder_start = None  # a ponderhit belongs to the search of one position

    def new_game(self) -> None:
        self.tree = None
        self._start_sfen, self._moves = None, []
        self._restricted = False

    # -- thinking -------------------------------------------------------------------------------
    def think(self, limits: Limits, stop: threading.Event | None = None,
              on_info: Callable[[Analysis], None] | None = None, info_interval_ms: int = 500,
              on_note: Callable[[str], None] | None = None) -> Analysis:
        """Search the current position within `limits`; `stop` ends the search early.

        `on_note` gets a line for the user once, when the tree fills its node or memory budget.
        """
        if self.tree is None:
            raise RuntimeError("think() before set_position()")
        if limits.searchmoves or self._restricted:
            self._restrict_root(limits.searchmoves)
        tree = self.tree
        board = tree.board
        start = time.perf_counter()
        clock = Limits(**{**vars(limits), "ponder": False})
        budget = allocate(clock, board.turn, board.move_number, self.cfg.usi.byoyomi_margin_ms,
                          self.cfg.usi.time_margin_ms)
        mate_seconds = ROOT_MATE_SHARE * budget.target_ms / 1000.0 if budget.target_ms else ROOT_MATE_SECONDS
        settled = root_checks(board, self.cfg.search.root_mate_depth, self.cfg.search.entering_king_rule,
                              allowed=limits.searchmoves, solver=self.mate, seconds=mate_seconds,
                              stop=stop.is_set if stop is not None else None)
        if settled is not None:
            return settled
        playouts = min(limits.playouts or self.cfg.usi.playouts, MAX_PLAYOUTS)
        if not playouts:
            until_stopped = budget.hard_ms or limits.open_ended or limits.ponder  # by the clock or a `stop`
            playouts = MAX_PLAYOUTS if until_stopped else self.cfg.search.playouts
            if self.cfg.search.algorithm == "gumbel" and budget.target_ms and not (limits.open_ended or limits.ponder):
                playouts = self._gumbel_budget(budget.target_ms)
        state = {"extended": False, "last_info": start, "pondering": limits.ponder, "full": False,
                 "last_check": None, "step_ms": 0.0}
        clock_start = [start]
        many_streams = self.search.cfg.eval_streams > 2

        def searched_ms() -> float:  # since the search began, pondering included: what its playouts took
            return (time.perf_counter() - start) * 1000.0

        def elapsed_ms() -> float:  # on the clock: since `go`, or since `ponderhit`
            if self._ponder_start is not None:  # ponderhit: the clock starts now
                clock_start[0] = self._ponder_start
                self._ponder_start = None
                state["pondering"] = False
            return (time.perf_counter() - clock_start[0]) * 1000.0

        def should_stop() -> bool:
            if stop is not None and stop.is_set():
                return True
            now_ms = elapsed_ms()
            if state["last_check"] is not None:  # a step's length, the recent longest fading by a quarter a step
                state["step_ms"] = max(now_ms - state["last_check"], 0.75 * state["step_ms"])
            state["last_check"] = now_ms
            if on_info and (time.perf_counter() - state["last_info"]) * 1000.0 >= info_interval_ms:
                state["last_info"] = time.perf_counter()
                on_info(self._analysis(start))
            if self.search.tree_full(self.tree):
                if on_note is not None and not state["full"]:
                    on_note(self._full_note())
                state["full"] = True
                return True
            if state["pondering"] or budget.hard_ms is None:
                return False
            drain_ms = 0.0  # the leaves in flight at this search's rate
            if many_streams and tree.playouts_done:
                drain_ms = tree.inflight * searched_ms() / tree.playouts_done
            if now_ms + HARD_STOP_STEPS * state["step_ms"] + drain_ms >= budget.hard_ms:
                return True
            return not budget.spend_all and self._time_says_stop(now_ms, budget.target_ms, budget.hard_ms, state)

        def guard_stop() -> bool:  # the mate guard ends at `stop` and at the hard limit: the clock bounds it too
            if stop is not None and stop.is_set():
                return True
            return budget.hard_ms is not None and elapsed_ms() >= budget.hard_ms and not state["pondering"]

        # the mate guard's df-pn in the helper process, so `stop`, `isready` and `quit` are answered while it runs
        self.search.run([tree], playouts, leaves_per_tree=self._step_leaves(budget.hard_ms), should_stop=should_stop,
                        guard_solver=self.mate, guard_stop=guard_stop)
        if tree.playouts_done >= 64:
            self._rate = tree.playouts_done / max(searched_ms(), 1.0)
        while limits.open_ended and stop is not None and not stop.is_set():
            stop.wait(0.01)  # `go infinite` must not answer before `stop`
        result = self._analysis(start)
        if on_info:
            on_info(result)
        return self._maybe_resign(result)

    def ponderhit(self) -> None:
        """The opponent played the pondered move: time management starts counting now."""
        self._ponder_start = time.perf_counter()

    # -- helpers --------------------------------------------------------------------------------
    def _restrict_root(self, searchmoves: tuple[int, ...]) -> None:
        """A new tree whose root holds only `searchmoves` (all moves when empty).

        A reused root was expanded with every move, and a restricted one must not serve a later
        search of all moves, so both directions start a fresh tree; only the root is filtered.
        """
        allowed = np.asarray(searchmoves, dtype=np.int64)

        def root_only(board: cshogi.Board, depth: int, moves: np.ndarray) -> np.ndarray | None:
            return np.isin(moves, allowed) if depth == 0 else None

        self.tree = Tree(_copy_board(self.tree.board), move_filter=root_only if searchmoves else None)
        self._restricted = bool(searchmoves)

    def _step_leaves(self, hard_ms: float | None) -> int:
        """Leaves each step adds: BatchSize, cut so that a step's batches (one per stream in flight) take
        about STEP_MS at the last search's speed (see STEP_MS)."""
        wanted = self.cfg.search.leaves_per_tree
        if self._rate is None:
            return min(wanted, FIRST_STEP_LEAVES)
        step_ms = STEP_MS if hard_ms is None else min(STEP_MS, hard_ms / 8)
        fits = int(self._rate * step_ms / max(self.search.cfg.eval_streams, 1))
        return min(wanted, max(fits, MIN_STEP_LEAVES))

    def _gumbel_budget(self, target_ms: float) -> int:
        """Gumbel's Sequential Halving needs its simulation budget up front: by time, the playouts
        the last search's speed fits into the target time (FIRST_GUMBEL_PLAYOUTS before any search was timed)."""
        return max(16, int(self._rate * target_ms)) if self._rate else FIRST_GUMBEL_PLAYOUTS

    def _full_note(self) -> str:
        tree, cfg = self.tree, self.cfg.search
        if tree.nodes >= cfg.node_limit:
            why = f"its node limit ({cfg.node_limit:,} nodes)"
        else:
            why = f"its memory budget (hash {cfg.hash_mb} MiB, {tree.nodes:,} nodes)"
        return f"the search tree reached {why}: it stops growing; the best move so far stands"

    def _time_says_stop(self, now_ms: float, target: float, hard: float, state: dict) -> bool:
        root = self.tree.root
        if not root.expanded or root.arena.count(root.index) < 2:
            return now_ms >= target
        n = root.n
        order = n.argsort()
        best, second = order[-1], order[-2]
        rate = self.tree.playouts_done / max(now_ms, 1.0)
        limit = hard if state["extended"] else target
        if now_ms >= 0.1 * target and can_stop_early(n[best], n[second], rate, limit - now_ms):
            return True
        if now_ms >= target:
            w = root.w
            q = lambda i: w[i] / n[i] if n[i] > 0 else 0.0  # noqa: E731
            if not state["extended"] and is_critical(n[best], n[second], q(best), q(second)) \
                    and 2 * target < hard:
                state["extended"] = True
                return False
            return not state["extended"] or now_ms >= min(2 * target, hard)
        return False

    def _analysis(self, start: float) -> Analysis:
        tree = self.tree
        elapsed = time.perf_counter() - start
        stats = move_stats(tree)
        pv = [cshogi.move_to_usi(m) for m in principal_variation(tree)]
        if not stats:
            return Analysis(bestmove="resign", nodes=tree.nodes)
        winrate = root_winrate(tree)
        best = pv[0] if pv else stats[0].usi
        return Analysis(
            bestmove=best, ponder=pv[1] if len(pv) > 1 else None, pv=pv or [best], winrate=winrate,
            score_cp=winrate_to_cp(winrate), mate=mate_distance(tree), moves=stats, nodes=tree.nodes,
            playouts=tree.playouts_done, time_ms=int(elapsed * 1000), nps=tree.playouts_done / max(elapsed, 1e-6))

    def _maybe_resign(self, result: Analysis) -> Analysis:
        if result.bestmove not in ("resign", "win") and result.mate is None \
                and result.winrate < self.resign_threshold:
            result.bestmove, result.ponder = "resign", None
        return result


def engine_rules(declaration: str = "27") -> GameRules:
    """The rules the engine settles a root by: mate and declaration only. Repetition and the move
    cap are the GUI's to judge (it sent the position, so the game is still on)."""
    return GameRules(repetitions=0, max_moves=0, declaration=declaration)


def root_checks(board: cshogi.Board, mate_depth: int, declaration: str = "27", allowed: tuple[int, ...] = (),
                solver: MateSolver | None = None, seconds: float = ROOT_MATE_SECONDS,
                stop: Callable[[], bool] | None = None) -> Analysis | None:
    """The answer when the rules settle the root: no legal move, a declaration win, a mate.

    Shared by the Player and the analysis engine, so both answer these positions the same way.
    Mates of up to MATE_MOVE_MAX_PLIES plies are searched here, shortest first; a deeper
    `mate_depth` goes on with df-pn in `solver`'s helper process for at most `seconds` and
    ROOT_MATE_NODES nodes, ended early when `stop()` turns true (without a solver the search ends
    at MATE_MOVE_MAX_PLIES). A df-pn mate is reported with the length of the line it proved, which
    is not always the shortest. With `allowed` (a `go searchmoves` list) a mate counts only when
    its first move is listed; a declaration is not a move, so it stands.
    """
    verdict = game_end(board, engine_rules(declaration))
    if verdict is not None and verdict.reason == END_MATE:
        return Analysis(bestmove="resign", winrate=0.0, score_cp=-30000)
    if verdict is not None and verdict.reason == END_DECLARATION:
        return Analysis(bestmove="win", winrate=1.0, score_cp=30000)
    listed = {cshogi.move16(m) for m in allowed}  # mate finders may return the 16-bit form of a move
    for d in range(1, min(mate_depth, MATE_MOVE_MAX_PLIES) + 1, 2):
        if stop is not None and stop():  # each depth holds the GIL for up to tens of ms: a stop ends them here
            return None
        move = find_mate(board, d)
        if move and (not listed or cshogi.move16(move) in listed):
            usi = cshogi.move_to_usi(move)
            return Analysis(bestmove=usi, pv=[usi], winrate=1.0, score_cp=30000, mate=d)
    if solver is None or mate_depth <= MATE_MOVE_MAX_PLIES:
        return None
    pv = solver.search(board, mate_depth, ROOT_MATE_NODES, seconds, stop)
    if pv and (not listed or cshogi.move16(board.move_from_usi(pv[0])) in listed):
        return Analysis(bestmove=pv[0], pv=pv, winrate=1.0, score_cp=30000, mate=len(pv))
    return None


def _copy_board(board: cshogi.Board) -> cshogi.Board:
    """A board with the same start position and history (cshogi's copy keeps both)."""
    return board.copy()
