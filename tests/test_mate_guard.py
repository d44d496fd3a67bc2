"""The mate guard (`search.mate_guard_nodes`): a searched move that hands the opponent a mate is not played.

The position is from a rating game of the teacher-trained student against GPS Shogi: the student
played 5i5h, after which GPS mates in 15 plies, far beyond the leaf mate search; of Black's 49
moves only 4h3i and the checking 5c4a+ avoid a mate df-pn finds in 30k nodes. The network here is
a stand-in whose prior points at the chosen moves, so that the search is sure to prefer them.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import cshogi
import numpy as np
import pytest
import shogi

from dlzero.config import Config, SearchConfig
from dlzero.encoding import NUM_LABELS, legal_moves_and_labels
from dlzero.inference.base import Evaluator, NullEvaluator
from dlzero.search import Search, Tree, chosen_index, move_stats
from dlzero.search.guard import DFPN_MAX_PLIES, guard_root, opponent_mate
from dlzero.search.mate import MateSolver
from dlzero.search.result import child_proof
from selfplay.games import selfplay_search_config

SFEN = "l5k1l/5gg2/p1+B+SNpnp1/8p/3p5/1n6P/P2PPPP2/2G2S3/L+rP1KG1N+b b Pr2sl5p 97"
NODES = 30_000
# White's bare king to move; after each king move Black has rook, bishop and silver in hand, and df-pn neither
# proves nor disproves a mate in 10^6 nodes (3.8-5 s each on a loaded core): a guard of 10^7 nodes held the GIL
# for a minute in-process
SLOW = "9/9/9/9/4k4/9/9/9/4K4 w RBS 1"


class FavourEvaluator(Evaluator):
    """Logits `weights[move]` at the labels of the listed moves of SFEN, 0 elsewhere, for every position
    (only the root's are meant); value 0."""

    backend = "favour"

    def __init__(self, weights: dict[str, float]) -> None:
        super().__init__(1 << 12)
        board = cshogi.Board(SFEN)
        moves, labels = legal_moves_and_labels(board)
        by_usi = {cshogi.move_to_usi(int(m)): int(lab) for m, lab in zip(moves, labels, strict=True)}
        self.logits = np.zeros(NUM_LABELS, dtype=np.float32)
        for usi, w in weights.items():
            self.logits[by_usi[usi]] = w

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.tile(self.logits, (len(planes), 1)), np.zeros(len(planes), dtype=np.float32)


def _search(weights: dict[str, float], solver: MateSolver | None = None, **search) -> tuple[Tree, Search]:
    cfg = dataclasses.replace(SearchConfig(), leaf_mate_depth=3, reuse_tree=False, **search)
    engine = Search(FavourEvaluator(weights), cfg, np.random.default_rng(0))
    tree = Tree(cshogi.Board(SFEN))
    engine.run([tree], 200, leaves_per_tree=8, guard_solver=solver)
    return tree, engine


def _played(tree: Tree) -> str:
    return cshogi.move_to_usi(int(tree.root.moves[chosen_index(tree)]))


def _stat(tree: Tree, usi: str):
    return next(s for s in move_stats(tree) if s.usi == usi)


def test_without_the_guard_the_search_plays_the_move_that_allows_mate() -> None:
    tree, engine = _search({"5i5h": 6.0, "4h3i": 4.0})
    assert _played(tree) == "5i5h"
    assert _stat(tree, "5i5h").proven is None
    assert engine.stats.guarded == 0


@pytest.mark.parametrize("algorithm", ["puct", "gumbel"])
def test_the_guard_proves_the_move_lost_and_plays_a_safe_one(algorithm: str) -> None:
    # 7 to 4: under Gumbel's halving 6 to 4 leaves the two moves a visit apart (49 to 48), and which one the
    # search prefers then turns on which leaves the evaluation cache serves; the test is about the guard
    tree, engine = _search({"5i5h": 7.0, "4h3i": 4.0}, mate_guard_nodes=NODES, algorithm=algorithm)
    assert _played(tree) == "4h3i"
    assert _stat(tree, "5i5h").proven == 0.0
    assert engine.stats.guarded == 1
    i = int(np.flatnonzero([cshogi.move_to_usi(int(m)) == "5i5h" for m in tree.root.moves])[0])
    assert tree.root.children[i].mate_plies == 15
    assert tree.board.sfen() == SFEN  # the guard leaves the root's board as it was


def test_the_proof_is_a_real_mate_by_an_independent_move_generator() -> None:
    board = cshogi.Board(SFEN)
    board.push_usi("5i5h")
    dfpn = cshogi.DfPn(DFPN_MAX_PLIES, NODES)
    plies, spent = opponent_mate(board, dfpn)
    pv = [cshogi.move_to_usi(m) for m in dfpn.get_pv(board)]
    assert plies == len(pv) == 15 and 0 < spent <= NODES
    oracle = shogi.Board(board.sfen())
    for k, usi in enumerate(pv):
        move = shogi.Move.from_usi(usi)
        assert move in oracle.legal_moves
        oracle.push(move)
        assert oracle.is_check() == (k % 2 == 0)  # the attacker checks on every move
    assert oracle.is_checkmate()
    safe = cshogi.Board(SFEN)
    safe.push_usi("4h3i")
    assert opponent_mate(safe, dfpn)[0] == 0


def test_the_guard_tries_moves_until_one_is_safe() -> None:
    """5i5h and 5i6h both allow a mate: both are proven lost and the third choice is played."""
    tree, engine = _search({"5i5h": 6.0, "5i6h": 5.0, "4h3i": 1.0}, mate_guard_nodes=NODES)
    assert _played(tree) == "4h3i"
    assert _stat(tree, "5i5h").proven == _stat(tree, "5i6h").proven == 0.0
    assert engine.stats.guarded == 2


def test_a_budget_too_small_for_the_proof_lets_the_move_through() -> None:
    """The mate after 5i5h takes df-pn several hundred nodes; with 100 in all the guard cannot prove it."""
    tree, engine = _search({"5i5h": 6.0, "4h3i": 4.0}, mate_guard_nodes=100)
    assert _played(tree) == "5i5h"
    assert engine.stats.guarded == 0
    assert guard_root(tree, NODES) == 1  # with the full budget it is proven
    assert _played(tree) == "4h3i"


def _marks(tree: Tree) -> dict[str, int]:
    """The mate length of each root move proven lost (by the guard, or the search's leaf mate search), by its USI."""
    root = tree.root
    return {cshogi.move_to_usi(int(m)): root.child(i).mate_plies for i, m in enumerate(root.moves)
            if child_proof(root, i) == 0.0}


@pytest.fixture()
def solver():
    helper = MateSolver()
    yield helper
    helper.close()


def test_the_helper_process_proves_the_same_moves_lost_as_df_pn_in_process(solver) -> None:
    """The engines (`dlzero usi`, `dlzero analyze`) run the guard's df-pn in the mate helper process, self-play
    in its own: the same moves are proven lost, with the same mates, whatever the budget."""
    weights = {"5i5h": 6.0, "5i6h": 5.0, "4h3i": 1.0}
    for budget in (400, 1500, NODES):
        here, _ = _search(weights)
        there, _ = _search(weights)
        assert guard_root(here, budget) == guard_root(there, budget, solver)
        assert _marks(here) == _marks(there)
        assert there.board.sfen() == SFEN
    assert _marks(there)["5i5h"] == 15 and "5i6h" in _marks(there) and _played(there) == "4h3i"
    tree, engine = _search(weights, solver, mate_guard_nodes=NODES)  # through the search, as the engines run it
    assert _played(tree) == "4h3i" and engine.stats.guarded == 2 and _marks(tree) == _marks(here)


def test_a_stop_ends_a_guard_in_the_helper_process_at_once(solver) -> None:
    """Issue 41: a guard of 10^7 nodes on a position slow for df-pn held the GIL for over a minute, and
    `stop`, `isready` and `quit` waited for it. In the helper process a stop ends it within a poll, the
    engine's other threads run all along, and the move the search chose stands."""
    cfg = dataclasses.replace(SearchConfig(), leaf_mate_depth=0, reuse_tree=False, mate_guard_nodes=10_000_000)
    engine = Search(NullEvaluator(), cfg, np.random.default_rng(0))
    tree = Tree(cshogi.Board(SLOW))
    solver.start()
    stop = threading.Event()
    stopped_at: list[float] = []
    ticks: list[float] = []

    def tick() -> None:  # another thread of the engine: it runs only while the GIL is free
        while not stop.wait(0.05):
            ticks.append(time.monotonic())

    def press_stop() -> None:
        stopped_at.append(time.monotonic())
        stop.set()

    ticker, timer = threading.Thread(target=tick), threading.Timer(1.0, press_stop)
    start = time.monotonic()
    ticker.start()
    timer.start()
    engine.run([tree], 32, leaves_per_tree=8, guard_solver=solver, guard_stop=stop.is_set)
    ended = time.monotonic()
    timer.join()
    ticker.join()
    assert stopped_at and ended > stopped_at[0]  # the guard was still running when the stop came
    assert ended - stopped_at[0] < 1.5
    assert tree.playouts_done >= 32 and tree.board.sfen() == cshogi.Board(SLOW).sfen()
    assert _played(tree) in {cshogi.move_to_usi(m) for m in tree.board.legal_moves} - _marks(tree).keys()
    assert len(ticks) >= 10 and np.diff([start, *ticks]).max() < 0.5
    # the helper is ready for the next search
    assert solver.search(cshogi.Board("4k4/9/4G4/9/9/9/9/9/4K4 b G 1"), DFPN_MAX_PLIES, 1000) == ["G*5b"]


def test_self_play_runs_the_guard_only_when_asked() -> None:
    cfg = Config()
    cfg.search = dataclasses.replace(cfg.search, mate_guard_nodes=NODES)
    assert selfplay_search_config(cfg).mate_guard_nodes == 0
    cfg.selfplay = dataclasses.replace(cfg.selfplay, mate_guard=True)
    assert selfplay_search_config(cfg).mate_guard_nodes == NODES


class _CountingDfPn:
    """cshogi's DfPn, counting the nodes of every search (the guard's whole spend)."""

    spent: list[int] = []

    def __init__(self, depth: int, nodes: int) -> None:
        self._dfpn = _REAL_DFPN(depth, nodes)

    def set_max_search_node(self, nodes: int) -> None:
        self._dfpn.set_max_search_node(nodes)

    def search(self, board: cshogi.Board) -> bool:
        found = self._dfpn.search(board)
        _CountingDfPn.spent.append(self._dfpn.searched_node)
        return found

    @property
    def searched_node(self) -> int:
        return self._dfpn.searched_node

    def get_pv(self, board: cshogi.Board) -> list[int]:
        return self._dfpn.get_pv(board)


_REAL_DFPN = cshogi.DfPn


@pytest.mark.parametrize("budget", [1, 50, 400, 1500, NODES])
def test_the_guard_spends_at_most_its_budget_over_every_move_it_tries(budget, monkeypatch) -> None:
    """Issue 41 asked whether the guard can overrun `mate_guard_nodes`: over two moves proven lost and the
    safe one after them, cshogi's df-pn searches add up to no more than the budget, whatever it is."""
    tree, _ = _search({"5i5h": 6.0, "5i6h": 5.0, "4h3i": 1.0})
    _CountingDfPn.spent = []
    monkeypatch.setattr(cshogi, "DfPn", _CountingDfPn)
    marked = guard_root(tree, budget)
    assert 0 < sum(_CountingDfPn.spent) <= budget and len(_CountingDfPn.spent) >= 1 + marked
    assert marked == {1: 0, NODES: 2}.get(budget, marked)  # one node proves nothing, the full budget both losses


def test_a_budget_past_what_df_pn_can_count_is_refused_by_the_config() -> None:
    """Issue 41: `search.mate_guard_nodes` took any count, and one past a C int (as `--set` or an analysis
    override) raised OverflowError in the guard, after the search, instead of a one-line config error."""
    from dlzero.config import DFPN_NODES_MAX, config_from_dict, config_to_dict
    from dlzero.errors import ConfigError

    raw = config_to_dict(Config())
    raw["search"]["mate_guard_nodes"] = DFPN_NODES_MAX
    assert config_from_dict(raw).search.mate_guard_nodes == DFPN_NODES_MAX
    raw["search"]["mate_guard_nodes"] = DFPN_NODES_MAX + 1
    with pytest.raises(ConfigError, match=f"mate_guard_nodes.*must be at most {DFPN_NODES_MAX}"):
        config_from_dict(raw)
    with pytest.raises(OverflowError):  # what such a budget did in the guard
        cshogi.DfPn(DFPN_MAX_PLIES, 1).set_max_search_node(DFPN_NODES_MAX + 1)
