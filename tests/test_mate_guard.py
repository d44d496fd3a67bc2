"""The mate guard (`search.mate_guard_nodes`): a searched move that hands the opponent a mate is not played.

The position is from a rating game of the teacher-trained student against GPS Shogi: the student
played 5i5h, after which GPS mates in 15 plies, far beyond the leaf mate search; of Black's 49
moves only 4h3i and the checking 5c4a+ avoid a mate df-pn finds in 30k nodes. The network here is
a stand-in whose prior points at the chosen moves, so that the search is sure to prefer them.
"""

from __future__ import annotations

import dataclasses

import cshogi
import numpy as np
import pytest
import shogi

from dlzero.config import Config, SearchConfig
from dlzero.encoding import NUM_LABELS, legal_moves_and_labels
from dlzero.inference.base import Evaluator
from dlzero.search import Search, Tree, chosen_index, move_stats
from dlzero.search.guard import DFPN_MAX_PLIES, guard_root, opponent_mate
from selfplay.games import selfplay_search_config

SFEN = "l5k1l/5gg2/p1+B+SNpnp1/8p/3p5/1n6P/P2PPPP2/2G2S3/L+rP1KG1N+b b Pr2sl5p 97"
NODES = 30_000


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


def _search(weights: dict[str, float], **search) -> tuple[Tree, Search]:
    cfg = dataclasses.replace(SearchConfig(), leaf_mate_depth=3, reuse_tree=False, **search)
    engine = Search(FavourEvaluator(weights), cfg, np.random.default_rng(0))
    tree = Tree(cshogi.Board(SFEN))
    engine.run([tree], 200, leaves_per_tree=8)
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
    tree, engine = _search({"5i5h": 6.0, "4h3i": 4.0}, mate_guard_nodes=NODES, algorithm=algorithm)
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
