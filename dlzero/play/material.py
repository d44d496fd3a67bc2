"""Material: piece values and the one count of them, for the alpha-beta anchor (`dlzero.play.alphabeta`,
which searches on it) and the opening suites' balance test (`dlzero.play.openings`, which asks what either
side can win by captures). All in centipawns (`PAWN` = 100).

Two tables, both frozen. `PIECE_VALUES` is the alpha-beta anchor's: an anchor of the rating scale must
play the same moves in every version, so a different table is a new anchor, never an edit here.
`SUITE_VALUES` (in pawns: lance 3, knight 4, silver 5, gold and the promoted minors 6, bishop 8, rook 10,
horse 10, dragon 12: a common rough scale) is the one the shipped gate suite was filtered with; judged by
the anchor's values, 16 of its 2000 lines would no longer count as balanced, and a match's seeded
variations beyond the suite would change. One table for both means a new suite.
"""

from __future__ import annotations

import cshogi

# Piece values by cshogi piece type (index 0 unused, the king has no material value):
#   pawn, lance, knight, silver, bishop, rook, gold, king,
#   +pawn, +lance, +knight, +silver, +bishop (horse), +rook (dragon)
PIECE_VALUES: tuple[int, ...] = (0, 100, 300, 350, 500, 800, 950, 550, 0, 550, 550, 550, 550, 1050, 1200)
SUITE_VALUES: tuple[int, ...] = (0, 100, 300, 400, 500, 800, 1000, 600, 0, 600, 600, 600, 600, 1000, 1200)
PAWN = 100
# cshogi's hand order (pawn, lance, knight, silver, gold, bishop, rook) as piece types
_HAND_TYPES: tuple[int, ...] = (cshogi.PAWN, cshogi.LANCE, cshogi.KNIGHT, cshogi.SILVER, cshogi.GOLD,
                                cshogi.BISHOP, cshogi.ROOK)


def _unpromoted(piece_type: int) -> int:
    return piece_type - 8 if piece_type > cshogi.KING else piece_type


# Material the mover gains: a capture removes the victim and puts its unpromoted kind in the mover's hand;
# a promotion swaps a piece's value for its promoted value.
_CAPTURE_GAIN: tuple[int, ...] = tuple(PIECE_VALUES[pt] + PIECE_VALUES[_unpromoted(pt)] if pt else 0
                                       for pt in range(15))
_PROMOTION_GAIN: tuple[int, ...] = tuple(PIECE_VALUES[pt + 8] - PIECE_VALUES[pt] if 1 <= pt <= 6 else 0
                                         for pt in range(15))


def material(board: cshogi.Board, values: tuple[int, ...] = PIECE_VALUES) -> int:
    """Material balance from the side to move's point of view (board and hand pieces), in centipawns."""
    total = 0
    for piece in board.pieces:
        if piece:
            value = values[piece & 15]
            total += value if piece < 16 else -value  # cshogi: white pieces are type + 16
    black_hand, white_hand = board.pieces_in_hand
    for pt, nb, nw in zip(_HAND_TYPES, black_hand, white_hand, strict=True):
        total += values[pt] * (nb - nw)
    return total if board.turn == cshogi.BLACK else -total


def move_gain(move: int) -> int:
    """Material the side making `move` gains by it (capture and promotion), in the anchor's centipawns."""
    gain = _CAPTURE_GAIN[cshogi.move_cap(move)]
    if cshogi.move_is_promotion(move):
        gain += _PROMOTION_GAIN[cshogi.move_from_piece_type(move)]
    return gain


def captures(board: cshogi.Board) -> list[int]:
    """The legal captures of the side to move, in cshogi's generation order."""
    return [m for m in board.legal_moves if cshogi.move_cap(m)]
