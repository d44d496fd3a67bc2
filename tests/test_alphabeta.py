"""The classical reference anchor: its moves on hand-made positions are pinned (it must never change)."""

from __future__ import annotations

import random

import cshogi
import pytest

from dlzero.play import Game, MoveChooser
from dlzero.play.alphabeta import AlphaBeta
from dlzero.play.material import material, move_gain

HANGING_ROOK = "4k4/9/9/9/7r1/6G2/9/9/4K4 b - 1"        # Gx2e wins a rook for nothing
MATE_IN_ONE = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"          # G*5b, guarded by the pawn
# Lx1a takes a rook but allows ...G*5h mate (the pawn on 5g guards 5h): the king must step aside
AVOID_MATE = "4k3r/9/9/9/9/9/4p4/9/4K3L b g 1"


def _usi(chooser: AlphaBeta, sfen: str) -> str:
    board = cshogi.Board(sfen)
    before = board.sfen()
    move = chooser.best_move(board)
    assert board.sfen() == before and board.is_legal(move)
    return cshogi.move_to_usi(move)


@pytest.mark.parametrize("nodes", [100, 1000, 10000])
def test_takes_a_hanging_rook(nodes):
    assert _usi(AlphaBeta(nodes), HANGING_ROOK) == "3f2e"


@pytest.mark.parametrize("nodes", [1, 100, 10000])
def test_mates_in_one(nodes):
    assert _usi(AlphaBeta(nodes), MATE_IN_ONE) == "G*5b"


@pytest.mark.parametrize("nodes", [100, 1000, 10000])
def test_avoids_a_mate_in_one(nodes):
    board = cshogi.Board(AVOID_MATE)
    greedy = board.move_from_usi("1i1a+")
    board.push(greedy)
    assert board.mate_move_in_1ply(), "the bait must really allow a mate in 1"
    board.pop()
    board.push(AlphaBeta(nodes).best_move(board))
    assert not board.mate_move_in_1ply()


def test_pinned_moves_from_the_start():
    """Golden moves: if these change, the anchor changed and every stored rating of it is void."""
    board = cshogi.Board()
    played = {}
    for nodes in (100, 1000):
        chooser = AlphaBeta(nodes)
        b = board.copy()
        line = []
        for _ in range(8):
            move = chooser.best_move(b)
            line.append(cshogi.move_to_usi(move))
            b.push(move)
        played[nodes] = " ".join(line)
    assert played == PINNED_LINES


PINNED_LINES = {
    100: "1g1f 1c1d 2g2f 2c2d 2f2e 2d2e 2h2e 3c3d",
    1000: "1g1f 1c1d 2g2f 2c2d 2f2e 2d2e 2h2e 4a3b",
}


def test_deterministic_and_a_move_chooser():
    chooser = AlphaBeta(300)
    assert isinstance(chooser, MoveChooser) and chooser.name == "alphabeta:300"
    games = [Game(cshogi.Board(HANGING_ROOK)), Game(cshogi.Board()), Game(cshogi.Board(AVOID_MATE))]
    assert chooser.choose(games) == AlphaBeta(300).choose(games) == [AlphaBeta(300).best_move(g.board) for g in games]
    with pytest.raises(ValueError):
        AlphaBeta(0)


def test_material_and_gain_agree():
    """The incremental material (move_gain) matches a recount from scratch after every move of random
    games (captures of promoted pieces, drops, promotions)."""
    rng = random.Random(5)
    assert material(cshogi.Board(HANGING_ROOK)) == 550 - 950
    kinds = set()
    for _ in range(4):
        board = cshogi.Board()
        for _ in range(300):
            moves = list(board.legal_moves)
            if not moves:
                break
            move = rng.choice(moves)
            kinds.add((bool(cshogi.move_cap(move)), cshogi.move_is_promotion(move), cshogi.move_is_drop(move)))
            before = material(board)
            board.push(move)
            assert material(board) == -(before + move_gain(move))
    assert {(True, False, False), (False, True, False), (False, False, True), (True, True, False)} <= kinds


def test_bench_reports_speed_and_results():
    from dlzero.bench.alphabeta import bench_alphabeta
    from dlzero.config import Config

    cfg = Config()
    cfg.gate.max_moves = 40
    low, high = bench_alphabeta(cfg, [20, 200], games=2)
    assert (low["rung"], high["rung"]) == ("alphabeta:20", "alphabeta:200")
    for row in (low, high):
        assert sum(map(int, row["wdl_vs_random"].split("-"))) == 2
        assert row["nodes_per_s"] > 0 and row["ms_per_move"] > 0 and 0 < row["mean_plies"] <= 40
        assert row["elo"].count("[") == 1
    assert low["wdl_vs_previous"] == "" and sum(map(int, high["wdl_vs_previous"].split("-"))) == 2
