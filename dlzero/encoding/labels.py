"""Moves <-> policy indices: dlshogi's 27 move classes x 81 destination squares = 2187.

`label = direction * 81 + to_square`, both squares seen from the side to move (rotated `80 - sq`
when White moves). Directions 0-9 are board moves (UP, UP_LEFT, UP_RIGHT, LEFT, RIGHT, DOWN,
DOWN_LEFT, DOWN_RIGHT, and the two knight jumps UP2_LEFT, UP2_RIGHT), 10-19 the same with promotion,
20-26 drops in piece-type order (pawn, lance, knight, silver, bishop, rook, gold). "Left" is towards
file 9 from the mover's seat.

A label does not name the moving piece, but in one position no two legal moves share a label: two
pieces moving the same way to the same square would stand on one ray, and the nearer blocks the
other. The policy head's output, flattened channel-major, is indexed by these labels directly.

Labels come from a table over (colour, promotion, from, to) built once from the rule above, so
labelling a whole move list is a single numpy gather.
"""

from __future__ import annotations

import cshogi
import numpy as np

try:  # the legal moves' labels compiled (dlzero/encoding/_planes.c); absent where the install found no C compiler
    from dlzero.encoding._planes import legal_moves_and_labels as _compiled_moves_and_labels
except ImportError:
    _compiled_moves_and_labels = None
# Whether `legal_moves_and_labels` reads the moves in C (the same arrays either way: tests/test_labels.py); a
# switch so that tests can compare the two.
COMPILED_LABELS = _compiled_moves_and_labels is not None

NUM_DIRECTIONS = 27
NUM_LABELS = NUM_DIRECTIONS * 81  # 2187

UP, UP_LEFT, UP_RIGHT, LEFT, RIGHT, DOWN, DOWN_LEFT, DOWN_RIGHT, UP2_LEFT, UP2_RIGHT = range(10)
PROMOTION_OFFSET = 10
DROP_BASE = 20  # + piece type - 1: pawn 20, lance 21, knight 22, silver 23, bishop 24, rook 25, gold 26


def _direction(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Board-move direction from file and rank deltas (dx = from_file - to_file, dy = to_rank - from_rank)."""
    d = np.full(dx.shape, -1, dtype=np.int32)
    d[(dy < 0) & (dx == 0)] = UP
    d[(dy < 0) & (dx < 0)] = UP_LEFT
    d[(dy < 0) & (dx > 0)] = UP_RIGHT
    d[(dy == 0) & (dx < 0)] = LEFT
    d[(dy == 0) & (dx > 0)] = RIGHT
    d[(dy > 0) & (dx == 0)] = DOWN
    d[(dy > 0) & (dx < 0)] = DOWN_LEFT
    d[(dy > 0) & (dx > 0)] = DOWN_RIGHT
    d[(dx == -1) & (dy == -2)] = UP2_LEFT
    d[(dx == 1) & (dy == -2)] = UP2_RIGHT
    return d


def _build_table() -> np.ndarray:
    """LABEL[colour, promote, from, to] for from in 0..87 (81.. are drops) and to in 0..80."""
    table = np.full((2, 2, 88, 81), -1, dtype=np.int32)
    frm, to = np.meshgrid(np.arange(81), np.arange(81), indexing="ij")
    for colour in (0, 1):
        f = frm if colour == 0 else 80 - frm
        t = to if colour == 0 else 80 - to
        dx = f // 9 - t // 9
        dy = t % 9 - f % 9
        direction = _direction(dx, dy)
        direction[frm == to] = -1
        for promote in (0, 1):
            labels = np.where(direction >= 0, (direction + PROMOTION_OFFSET * promote) * 81 + t, -1)
            table[colour, promote, :81, :] = labels
        t_row = np.arange(81) if colour == 0 else 80 - np.arange(81)
        for piece in range(7):
            table[colour, 0, 81 + piece, :] = (DROP_BASE + piece) * 81 + t_row
    return table


LABEL_TABLE = _build_table()
# The same table indexed by a move's low 15 bits (promotion << 14 | from << 7 | to), padded with -1:
# one lookup per move instead of four bit extractions (labelling every new leaf is on the search's path).
_PADDED = np.full((2, 2, 128, 128), -1, dtype=np.int32)
_PADDED[:, :, :88, :81] = LABEL_TABLE
LABEL_BY_MOVE16 = _PADDED.reshape(2, 1 << 15)
_LABEL_ROWS = (LABEL_BY_MOVE16[0], LABEL_BY_MOVE16[1])  # one colour's row: a 1-D gather is twice as fast
_INT64, _INT32 = np.dtype(np.int64), np.dtype(np.int32)  # np.empty is twice as quick given a dtype, not a type


def labels_of(moves: np.ndarray, colour: int) -> np.ndarray:
    """Labels (int32) of an array of cshogi move ints (or move16s) played by `colour`."""
    return LABEL_BY_MOVE16[colour, np.asarray(moves, dtype=np.int64) & 0x7FFF]  # colour may be an array


def move_to_label(board: cshogi.Board, move: int) -> int:
    """Policy index (0..2186) of `move` (cshogi's move int) for the side to move in `board`."""
    return int(LABEL_TABLE[board.turn, (move >> 14) & 1, (move >> 7) & 0x7F, move & 0x7F])


def legal_moves_and_labels(board: cshogi.Board) -> tuple[np.ndarray, np.ndarray]:
    """All legal moves of `board` (cshogi move ints, int64) and their labels (int32), in one call.

    This is what search needs to expand a node: gather the policy logits at the labels and
    remember which move each child is.
    """
    if COMPILED_LABELS:  # a new leaf's moves: ~0.8 us instead of ~2.9 (_planes.c)
        listed = board.legal_moves
        moves, labels = np.empty(len(listed), _INT64), np.empty(len(listed), _INT32)
        _compiled_moves_and_labels(listed, _LABEL_ROWS[board.turn], moves, labels)
        return moves, labels
    moves = np.fromiter(board.legal_moves, dtype=np.int64)
    return moves, _LABEL_ROWS[board.turn][moves & 0x7FFF]


def legal_label_mask(board: cshogi.Board) -> np.ndarray:
    """Boolean (2187,) mask of the labels of the legal moves of `board`."""
    mask = np.zeros(NUM_LABELS, dtype=bool)
    mask[legal_moves_and_labels(board)[1]] = True
    return mask


def label_to_move(board: cshogi.Board, label: int) -> int:
    """The legal move of `board` with this label, or 0 when no legal move has it."""
    moves, labels = legal_moves_and_labels(board)
    hit = np.nonzero(labels == label)[0]
    return int(moves[hit[0]]) if hit.size else 0
