"""scripts/make_validation_set.py: its games end, and are stored, by the rules every game of dlzero goes by
(`dlzero.play.play_rules`, `dlzero.play.record`), so perpetual check and declaration score as in training data."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import cshogi
import numpy as np
import pytest

from dlzero.data.hcpe3 import BLACK_WIN, FLAG_MAX_MOVES, FLAG_NYUGYOKU, FLAG_REPETITION, RESULT_DRAW, WHITE_WIN
from dlzero.play.usi_client import Go

ROOT = Path(__file__).resolve().parents[1]

# Black's rook checks from 1d and 2d in turn, White's king steps between 1a and 2a: the start position's fourth
# occurrence comes after 12 plies, and Black, who gave every check, loses
PERPETUAL = "8k/9/9/7R1/9/9/9/9/4K4 b - 1"
PERPETUAL_CYCLE = ["2d1d", "1a2a", "1d2d", "2a1a"]
# after White's pawn move Black (king on 1a, 10 pieces in camp, 28 points with its two pawns in hand) declares
DECLARING = "RRBB4K/PPPPPP3/9/9/8p/9/9/9/4k4 w 2P 1"


def _script() -> ModuleType:
    """The script as a module, registered in sys.modules first as an import would (its dataclass needs that)."""
    spec = importlib.util.spec_from_file_location("make_validation_set", ROOT / "scripts" / "make_validation_set.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def _hcp(board: cshogi.Board) -> bytes:
    hcp = np.zeros(32, np.uint8)
    board.to_hcp(hcp)
    return hcp.tobytes()


class ScriptedEngine:
    """A stand-in for `UsiClient`: plays `moves` in turn (cycled), each with a score of 7 cp."""

    def __init__(self, moves: list[str]) -> None:
        self.moves = moves
        self.asked = 0

    def new_game(self) -> None:
        self.asked = 0

    def search(self, board: cshogi.Board, limits: Go) -> tuple[list[str], list[str]]:
        move = self.moves[self.asked % len(self.moves)]
        self.asked += 1
        return [f"info depth 1 score cp 7 pv {move}"], ["bestmove", move]


@pytest.mark.parametrize(("sfen", "moves", "result", "plies"), [
    (PERPETUAL, PERPETUAL_CYCLE, WHITE_WIN | FLAG_REPETITION, 12),  # the checker loses: not a draw, not the cap
    (DECLARING, ["1e1f"], BLACK_WIN | FLAG_NYUGYOKU, 1),  # the rules' declaration, before the engine is asked
    ("8k/9/9/9/9/9/9/9/4K4 b - 1", ["5i5h", "1a1b", "5h5i", "1b1a"], RESULT_DRAW | FLAG_REPETITION, 12),
    (PERPETUAL, ["resign"], WHITE_WIN, 0),
    (DECLARING, ["win"], WHITE_WIN | FLAG_NYUGYOKU, 0),  # the engine's own declaration: a win for the mover
])
def test_games_end_and_are_stored_by_the_rules_of_every_game(sfen, moves, result, plies):
    engine = ScriptedEngine(moves)
    record = SCRIPT.play_game(engine, cshogi.Board(sfen), max_plies=100, nodes=1)
    assert record.result == result
    assert len(record.moves) == plies == engine.asked - (moves[0] in ("resign", "win"))
    assert all(m.eval == 7 and m.candidates.tolist() == [[m.move16, 1]] for m in record.moves)
    assert record.start_hcp.tobytes() == _hcp(cshogi.Board(sfen))


def test_the_opening_is_stored_replay_only_and_the_move_cap_draws():
    board = cshogi.Board()
    board.push_usi("7g7f")
    record = SCRIPT.play_game(ScriptedEngine(["5a5b", "5i5h", "5b5a", "5h5i"]), board, max_plies=4, nodes=1)
    assert record.result == RESULT_DRAW | FLAG_MAX_MOVES
    # stored from the opening's start: its ply replay-only, then the engine's 3 (the fourth would pass ply 4)
    assert record.start_hcp.tobytes() == _hcp(cshogi.Board()) and len(record.moves) == 4
    assert [m.is_target for m in record.moves] == [False, True, True, True]
