"""What the search reports about proven results: only real mates are mates (issue 10, defect 5)."""

from __future__ import annotations

import dataclasses

import numpy as np

from dlzero.config import Config, SearchConfig
from dlzero.encoding import NUM_LABELS
from dlzero.engine.player import Player
from dlzero.engine.timeman import Limits
from dlzero.inference import NullEvaluator
from dlzero.inference.base import Evaluator
from dlzero.position import parse_position
from dlzero.search import Search, Tree, find_mate, mate_distance, principal_variation

MATE1 = "sfen 4k4/9/4G4/9/9/9/9/9/4K4 b G 1"        # G*5b mates
MATE3 = "sfen 4k4/9/9/4G4/9/9/9/9/4K4 b RG 1"       # no mate in 1, mate in 3
# After 2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h, White's 7b8b brings back the start position a third time.
REPEAT = "startpos moves 2h3h 8b7b 3h2h 7b8b 2h3h 8b7b 3h2h"


class WinningEverywhere(Evaluator):
    """Uniform policy, and every position is clearly won for its side to move (v = 0.9): each normal
    move looks bad for the mover, so the search prefers any draw it can reach."""

    backend = "fake"

    def __init__(self) -> None:
        super().__init__(1 << 12)

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.zeros((n, NUM_LABELS), np.float32), np.full(n, 0.9, np.float32)


def _cfg(**search) -> Config:
    cfg = Config()
    cfg.search = dataclasses.replace(cfg.search, **search)
    return cfg


def test_a_pv_ending_in_repetition_is_not_a_mate():
    cfg = SearchConfig(root_mate_depth=0, leaf_mate_depth=0, draw_value_black=0.5, draw_value_white=0.5)
    board = parse_position(REPEAT)
    tree = Tree(board)
    Search(WinningEverywhere(), cfg).run([tree], 400, leaves_per_tree=1)
    pv = principal_variation(tree)
    assert pv and pv[0] == board.move_from_usi("7b8b")  # the draw is White's best by far
    child = tree.root.children[tree.root.child_index(pv[0])]
    assert child.terminal == 0.5  # proven, but by repetition: `score mate -1` was reported
    assert mate_distance(tree) is None
    assert child.mate_plies is None


def test_the_engine_reports_a_score_and_may_resign_in_a_repetition_line():
    cfg = _cfg(root_mate_depth=0, leaf_mate_depth=0, draw_value_black=0.5, draw_value_white=0.5)
    cfg.usi = dataclasses.replace(cfg.usi, resign_threshold=0.6)
    player = Player(WinningEverywhere(), cfg)
    player.set_position(parse_position(REPEAT))
    result = player.think(Limits(playouts=400))
    assert result.mate is None and result.score_cp == 0
    assert result.bestmove == "resign"  # 0.5 < 0.6: a draw line no longer blocks resignation


def test_real_mates_are_reported_with_their_length():
    from dlzero.search.rules import leaf_proof, mate_length

    player = Player(NullEvaluator(), _cfg(root_mate_depth=0, leaf_mate_depth=0))
    player.set_position(parse_position(MATE1))
    assert player.think(Limits(playouts=300)).mate == 1
    # a mate in 3 proven at a leaf by the mate search is 3 plies away, not 1
    tree = Tree(parse_position(MATE3))
    Search(NullEvaluator(), SearchConfig(root_mate_depth=0, leaf_mate_depth=3)).run([tree], 50, leaves_per_tree=1)
    assert tree.root.terminal is None
    board = parse_position(MATE3)
    assert leaf_proof(board, SearchConfig(leaf_mate_depth=3), len(list(board.legal_moves))) == (1.0, 3)
    assert mate_length(board, 5) == 3 and mate_length(parse_position(MATE1), 5) == 1


def test_a_mate_proven_two_plies_down_counts_the_plies_below_it():
    # with a mate-in-1 search at the leaves, the tree proves Black's first move wins: every White
    # reply reaches a node where Black mates in 1, so the mate is 3 plies away (it used to say 2)
    board = parse_position(MATE3)
    tree = Tree(board)
    Search(NullEvaluator(), SearchConfig(root_mate_depth=0, leaf_mate_depth=1)).run([tree], 300, leaves_per_tree=1)
    pv = principal_variation(tree)
    assert len(pv) == 2 and mate_distance(tree) == 3
    board.push(pv[0])
    for reply in board.legal_moves:  # an independent check that it is a mate in 3
        board.push(reply)
        assert find_mate(board, 1)
        board.pop()
