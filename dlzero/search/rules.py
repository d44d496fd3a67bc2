"""The search's view of the game-end rules (`dlzero.game_end`), plus its own mate search.

`leaf_result` returns the proven win rate for the side to move, or None when the position needs
the network. It runs once per new node, before any evaluation: first the game-end rules as the
search plays them (`leaf_rules`: the first repetition ends the line, superior/inferior hands
decide a repetition, draws worth the mover's draw value), then a short mate search.
"""

from __future__ import annotations

import cshogi

from dlzero.config import SearchConfig
from dlzero.game_end import REPETITION_PLIES, GameRules, leaf_value

__all__ = ["REPETITION_PLIES", "find_mate", "leaf_result", "leaf_rules"]


def leaf_rules(cfg: SearchConfig) -> GameRules:
    """The rules at a search leaf: a line ends at its first repetition (playing on into a cycle
    gains nothing), and the search's own move cap, declaration rule and draw values apply."""
    return GameRules(repetitions=1, superior_repetition=True, max_moves=cfg.max_moves,
                     declaration=cfg.entering_king_rule, draw_value_black=cfg.draw_value_black,
                     draw_value_white=cfg.draw_value_white)


def leaf_result(board: cshogi.Board, cfg: SearchConfig, n_legal: int) -> float | None:
    """Proven win rate for the side to move at a new leaf, or None if the network must judge.

    The game-end rules first (`dlzero.game_end` order), then a mate within `leaf_mate_depth`
    plies by the side to move.
    """
    value = leaf_value(board, leaf_rules(cfg), n_legal)
    if value is not None:
        return value
    if cfg.leaf_mate_depth and not board.is_check() and find_mate(board, cfg.leaf_mate_depth):
        return 1.0
    return None


def find_mate(board: cshogi.Board, depth: int) -> int:
    """A move that mates within `depth` plies (odd), or 0. The side to move must not be in check."""
    if depth <= 0 or board.is_check():
        return 0
    move = board.mate_move_in_1ply()
    if move or depth < 3:
        return move
    return board.mate_move(depth)
