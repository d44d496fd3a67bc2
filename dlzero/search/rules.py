"""The search's view of the game-end rules (`dlzero.game_end`), plus its own mate search.

`leaf_proof` returns the proven win rate for the side to move and, when the proof is a mate, its
length in plies (so that only real mates are ever reported as mates: a repetition, a draw by move
count or a declaration is proven too, but is no mate); None when the position needs the network.
`leaf_result` is the win rate alone. They run once per new node, before any evaluation: first the
game-end rules as the search plays them (`leaf_rules`: the first repetition ends the line,
superior/inferior hands decide a repetition, draws worth the mover's draw value), then a short mate
search.
"""

from __future__ import annotations

import functools

import cshogi

from dlzero.config import SearchConfig
from dlzero.game_end import END_MATE, REPETITION_PLIES, GameRules, game_end, verdict_value

__all__ = ["REPETITION_PLIES", "find_mate", "leaf_proof", "leaf_result", "leaf_rules", "mate_length"]


def leaf_rules(cfg: SearchConfig) -> GameRules:
    """The rules at a search leaf: a line ends at its first repetition (playing on into a cycle
    gains nothing), and the search's own move cap, declaration rule and draw values apply."""
    return _leaf_rules(cfg.max_moves, cfg.entering_king_rule, cfg.draw_value_black, cfg.draw_value_white)


@functools.lru_cache(maxsize=64)
def _leaf_rules(max_moves: int, declaration: str, draw_value_black: float, draw_value_white: float) -> GameRules:
    """One GameRules per distinct setting: every new leaf asks, and building (and validating) the frozen
    dataclass each time cost as much as the game-end checks themselves."""
    return GameRules(repetitions=1, superior_repetition=True, max_moves=max_moves, declaration=declaration,
                     draw_value_black=draw_value_black, draw_value_white=draw_value_white)


def leaf_proof(board: cshogi.Board, cfg: SearchConfig, n_legal: int) -> tuple[float, int | None] | None:
    """(proven win rate for the side to move, plies to mate or None) at a new leaf, or None if the
    network must judge. Plies to mate: 0 when the side to move is mated, k when it mates in k;
    None when the proof is no mate (repetition, perpetual check, move cap, declaration).

    The game-end rules first (`dlzero.game_end` order), then a mate within `leaf_mate_depth`
    plies by the side to move.
    """
    rules = leaf_rules(cfg)
    verdict = game_end(board, rules, n_legal)
    if verdict is not None:
        return verdict_value(verdict, board, rules), (0 if verdict.reason == END_MATE else None)
    if cfg.leaf_mate_depth and not board.is_check():
        plies = mate_length(board, cfg.leaf_mate_depth)
        if plies:
            return 1.0, plies
    return None


def leaf_result(board: cshogi.Board, cfg: SearchConfig, n_legal: int) -> float | None:
    """Proven win rate for the side to move at a new leaf, or None if the network must judge."""
    proof = leaf_proof(board, cfg, n_legal)
    return None if proof is None else proof[0]


def mate_length(board: cshogi.Board, depth: int) -> int:
    """Plies of the shortest mate within `depth` plies by the side to move (odd), or 0 if none.

    Tries the full depth first: shorter depths are searched only once a mate is known to exist.
    """
    if not find_mate(board, depth):
        return 0
    for d in range(1, depth, 2):
        if find_mate(board, d):
            return d
    return depth if depth % 2 else depth - 1


def find_mate(board: cshogi.Board, depth: int) -> int:
    """A move that mates within `depth` plies (odd), or 0. The side to move must not be in check."""
    if depth <= 0 or board.is_check():
        return 0
    move = board.mate_move_in_1ply()
    if move or depth < 3:
        return move
    return board.mate_move(depth)
