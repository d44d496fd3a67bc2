"""Game-end rules at a search leaf, all from cshogi: repetition, max moves, mate, declaration.

`leaf_proof` returns the proven win rate for the side to move and, when the proof is a mate, its
length in plies (so that only real mates are ever reported as mates: a repetition, a draw by move
count or a declaration is proven too, but is no mate); None when the position needs the network.
`leaf_result` is the win rate alone. They run once per new node, before any evaluation.
"""

from __future__ import annotations

import cshogi

from dlzero.config import SearchConfig

# cshogi.is_draw results -> win rate for the side to move (None: use the draw value)
_REPETITION_VALUE = {
    cshogi.REPETITION_DRAW: None,
    cshogi.REPETITION_WIN: 1.0,       # the opponent gave perpetual check: it loses
    cshogi.REPETITION_LOSE: 0.0,      # we gave perpetual check
    cshogi.REPETITION_SUPERIOR: 1.0,  # same board, we hold more in hand
    cshogi.REPETITION_INFERIOR: 0.0,
}
REPETITION_PLIES = 16


def draw_value(cfg: SearchConfig, colour: int) -> float:
    """Win rate a draw is worth to `colour` (cshogi.BLACK / WHITE) when `colour` makes the drawing move."""
    return cfg.draw_value_black if colour == cshogi.BLACK else cfg.draw_value_white


def draw_result(cfg: SearchConfig, board: cshogi.Board) -> float:
    """Win rate for the side to move of a drawn position, keyed to the player who moved into it.

    As in dlshogi, the draw value belongs to the mover: with both values below 0.5 each side
    avoids drawing moves (contempt), and the backup stays zero-sum edge by edge.
    """
    return 1.0 - draw_value(cfg, 1 - board.turn)


def repetition_result(board: cshogi.Board, cfg: SearchConfig) -> float | None:
    """Win rate for the side to move if the position repeats an earlier one, else None."""
    rep = board.is_draw(REPETITION_PLIES)
    if rep == cshogi.NOT_REPETITION:
        return None
    value = _REPETITION_VALUE.get(rep)
    return draw_result(cfg, board) if value is None else value


def leaf_proof(board: cshogi.Board, cfg: SearchConfig, n_legal: int) -> tuple[float, int | None] | None:
    """(proven win rate for the side to move, plies to mate or None) at a new leaf, or None if the
    network must judge. Plies to mate: 0 when the side to move is mated, k when it mates in k;
    None when the proof is no mate (repetition, perpetual check, move cap, declaration).

    Order matters: repetition and the move cap end the game before anyone moves; then no legal
    move (mated); then the side to move can declare (27-point rule) or mates within
    `leaf_mate_depth` plies.
    """
    rep = repetition_result(board, cfg)
    if rep is not None:
        return rep, None
    if board.move_number > cfg.max_moves:
        return draw_result(cfg, board), None
    if n_legal == 0:
        return 0.0, 0
    if board.is_nyugyoku():
        return 1.0, None
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
