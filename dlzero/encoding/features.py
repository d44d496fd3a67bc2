"""Position -> 100 input planes of 9x9, from the side to move's point of view.

Square layout follows dlshogi: a plane is indexed `[file][rank]` with square `sq = file*9 + rank`
(file 0 is file 1, rank 0 is rank a), so reshaping 81 values to 9x9 gives `[file][rank]`. When
White is to move every square is rotated (`80 - sq`) and colours are swapped, so the network always
sees the position as the player to move.

| planes | meaning |
|---|---|
| 0-13 | side to move's pieces, one plane per piece type (P L N S B R G K +P +L +N +S +B +R) |
| 14-27 | squares attacked by the side to move's pieces of each type (sliders stop at any piece) |
| 28-30 | number of the side to move's attackers of the square, thermometer (>=1, >=2, >=3) |
| 31-61 | the same 31 planes for the opponent (planes 0-61 are exactly dlshogi's features1) |
| 62-68 | side to move's hand: pawns/18, lances/4, knights/4, silvers/4, golds/4, bishops/2, rooks/2 |
| 69-75 | opponent's hand, same scaling |
| 76 | side to move is in check |
| 77-79 | this position occurred before (within the last 32 plies): >=1, >=2, >=3 times |
| 80 | side to move is White (all ones), since sente and gote are not symmetric in value |
| 81 | game progress: plies played / 512, capped at 1 (the max-moves draw draws near) |
| 82 | side to move's king stands in the enemy camp (entering king, nyugyoku) |
| 83 | side to move's pieces in the enemy camp, king excluded, /10 capped at 1 |
| 84 | side to move's declaration points (5 per rook/bishop, 1 per other piece, in camp or hand) / target |
| 85 | side to move can declare an entering-king win now (27-point rule) |
| 86-88 | planes 82-84 for the opponent (89 is reserved: whether the opponent could declare is not asked) |
| 89 | reserved, zero |
| 90 | destination square of the last move (the opponent's) |
| 91 | origin square of the last move (empty for drops) |
| 92-99 | reserved, zero (kept so that the input shape stays 100 as features are added) |

Planes 62-99 hold scalars broadcast over the board, except 90-91. Point targets are dlshogi's: 28
for Black, 27 for White. `ENCODER_VERSION` is stored in every model file; a change in this table
must bump it.
"""

from __future__ import annotations

import cshogi
import cshogi.dlshogi as dl
import numpy as np

from dlzero.game_end import earlier_occurrences

try:  # planes 62-99 of a row compiled (dlzero/encoding/_planes.c); absent where the install found no C compiler
    from dlzero.encoding._planes import fill_board_row as _compiled_fill_board_row
except ImportError:
    _compiled_fill_board_row = None
# Whether `Encoder.add` writes planes 62-99 itself (compiled) instead of leaving them to `finish` (numpy): the
# same bits either way (tests/test_features.py), a switch so that tests can compare the two.
COMPILED_PLANES = _compiled_fill_board_row is not None

NUM_PLANES = 100
ENCODER_VERSION = 1

PLANE_HAND_US = 62
PLANE_HAND_THEM = 69
PLANE_CHECK = 76
PLANE_REPETITION = 77
PLANE_WHITE = 80
PLANE_PROGRESS = 81
PLANE_NYUGYOKU_US = 82
PLANE_NYUGYOKU_THEM = 86
PLANE_LAST_TO = 90
PLANE_LAST_FROM = 91

REPETITION_LOOKBACK = 32
PROGRESS_PLIES = 512.0

_HAND_SCALE = np.array([18, 4, 4, 4, 4, 2, 2], dtype=np.float32)  # P L N S G B R (hand order)
_DECLARE_TARGET = (28, 27)  # points Black / White need to declare

# Planes 0-13 (and 31-44 for the opponent) are the piece types P L N S B R G K +P +L +N +S +B +R:
# declaration points per type (5 for rooks and bishops, promoted or not, 0 for the king, 1 otherwise),
# whether a type counts as a piece in the camp (all but the king), and the king's plane.
_TYPE_POINTS = np.array([1, 1, 1, 1, 5, 5, 1, 0, 1, 1, 1, 1, 5, 5], dtype=np.float32)
_TYPE_COUNTS = np.array([1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1], dtype=np.float32)
_KING_TYPE = 7
_HAND_POINTS = np.array([1, 1, 1, 1, 1, 5, 5], dtype=np.float32)  # P L N S G B R (hand order)
# Every plane is seen from the side to move (rotated for White), so the side to move's enemy camp is
# always ranks 0-2 of its planes and the opponent's enemy camp ranks 6-8 (masks over sq = file*9 + rank).
_CAMP_US = (np.arange(81) % 9 <= 2).astype(np.float32)
_CAMP_THEM = (np.arange(81) % 9 >= 6).astype(np.float32)
# (piece counts per type) @ _FIGURES = (king, other pieces, their declaration points)
_FIGURES = np.stack([np.eye(14, dtype=np.float32)[_KING_TYPE], _TYPE_COUNTS, _TYPE_POINTS], axis=1)
# The planes `Encoder.add` reads off the board, in the order of its list of values (planes 82-84, 86-88
# and 90-91 are worked out in `finish`, the rest are reserved and stay zero).
_ROW_PLANES = np.array([*range(62, 82), 85])
_HAND_SCALE_ROW = np.concatenate([_HAND_SCALE, _HAND_SCALE, np.ones(len(_ROW_PLANES) - 14, dtype=np.float32)])


def repetition_count(board: cshogi.Board) -> int:
    """How often the current position occurred earlier within the lookback window (0..3).

    cshogi's `is_draw` answers the common case (no repetition) cheaply; only a repeated position is
    counted, by the game-end rules' own counter.
    """
    if board.is_draw(REPETITION_LOOKBACK) == cshogi.NOT_REPETITION:
        return 0
    return min(earlier_occurrences(board, REPETITION_LOOKBACK), 3)


def _camp_figures(pieces: np.ndarray, camp: np.ndarray) -> np.ndarray:
    """(B, 3): king in the camp, other pieces in the camp, their declaration points, per row, from one
    side's 14 piece planes (B, 14, 9, 9) and the mask of its enemy camp (81,). Two matrix products:
    a strided sum over the camp's ranks costs ten times more."""
    return (pieces.reshape(len(pieces), 14, 81) @ camp) @ _FIGURES


def _check_buffer(out: np.ndarray, shape: tuple[int, ...]) -> None:
    """cshogi writes raw float32s through the buffer's pointer: any other dtype, shape or layout
    would be filled with garbage without an error (or written past its end, for a smaller dtype)."""
    if not (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == shape
            and out.flags.c_contiguous and out.flags.writeable):
        got = f"{out.dtype} {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"encoder buffer must be a writeable C-contiguous float32 array of shape {shape}, "
                         f"got {got}")


class Encoder:
    """Encodes positions into caller-owned buffers, a batch at a time.

    `begin(buffer)`, then `add(board)` per position, then `finish()`. `add` writes cshogi's 62 planes
    and reads what only the board knows (hands, check, repetitions, ply, last move) while the board is in
    that position; `finish` works out the entering-king planes of every row at once from the piece
    planes already written (a camp is a band of ranks in the side to move's frame), broadcasts every
    row's values over its planes in one numpy call and marks the last moves. The search adds each leaf
    as it reaches it and finishes once per network call, so the numpy calls are paid once per batch
    instead of once per leaf, and no per-square loop runs in Python.

    One Encoder per thread: it keeps the batch being built.
    """

    def __init__(self) -> None:
        self._f2 = np.empty((dl.FEATURES2_NUM, 9, 9), dtype=np.float32)
        self._out: np.ndarray | None = None
        self._n = 0  # rows added to the batch being built
        self._rows: list[list[float]] = []  # numpy path: each row's values, for `finish`
        self._last: list[tuple[int, int, int]] = []  # numpy path: (row, plane, square) of each last-move mark

    def begin(self, out: np.ndarray) -> None:
        """Start a batch in `out` (B, 100, 9, 9) float32, C-contiguous; rows are added from 0."""
        _check_buffer(out, (out.shape[0] if getattr(out, "ndim", 0) == 4 else -1, NUM_PLANES, 9, 9))
        self._out, self._n, self._rows, self._last = out, 0, [], []

    def add(self, board: cshogi.Board, repetitions: int | None = None) -> int:
        """Encode `board` as the batch's next row (returned). `repetitions` (0..3) is
        `repetition_count` of the position when the caller knows it without the board's history:
        training data counts it once while replaying the whole game, and rebuilds the board from one
        position. None: counted from `board`'s history. `board` may change once this returns.

        Compiled, the whole row is written here; otherwise planes 62-99 wait for `finish`."""
        out = self._out
        row = self._n
        if out is None or row >= out.shape[0]:
            raise ValueError("Encoder.add: no batch begun, or the batch buffer is full")
        dl.make_input_features(board, out[row, :62], self._f2)
        if COMPILED_PLANES:  # the board's scalars read and planes 62-99 written in C
            _compiled_fill_board_row(out, row, board, self._f2,
                                     repetition_count(board) if repetitions is None else repetitions)
            self._n = row + 1
            return row
        us = board.turn
        hands = board.pieces_in_hand
        reps = repetition_count(board) if repetitions is None else repetitions
        progress = min((board.move_number - 1) / PROGRESS_PLIES, 1.0)
        last = board.peek()
        last_to = last_from = -1
        if last:
            flip = us == cshogi.WHITE
            to_sq = cshogi.move_to(last)
            last_to = 80 - to_sq if flip else to_sq
            if not cshogi.move_is_drop(last):
                from_sq = cshogi.move_from(last)
                last_from = 80 - from_sq if flip else from_sq
        self._n = row + 1
        # `_ROW_PLANES`: hand counts (scaled in `finish`), planes 76-81 and 85
        self._rows.append([*hands[us], *hands[1 - us], float(self._f2[56, 0, 0]), float(reps >= 1),
                           float(reps >= 2), float(reps >= 3), float(us == cshogi.WHITE), progress,
                           1.0 if board.is_nyugyoku() else 0.0])
        if last_to >= 0:
            self._last.append((row, PLANE_LAST_TO, last_to))
        if last_from >= 0:
            self._last.append((row, PLANE_LAST_FROM, last_from))
        return row

    def finish(self) -> np.ndarray:
        """Fill planes 62-99 of every added row (unless `add` did); returns the rows' view of the buffer."""
        out, n, rows, last = self._out, self._n, self._rows, self._last
        self._out, self._n, self._rows, self._last = None, 0, [], []
        if out is None:
            raise ValueError("Encoder.finish: no batch begun")
        rows_out = out[:n]
        if rows:
            read = np.array(rows, dtype=np.float32)
            hand_points = read[:, :7] @ _HAND_POINTS, read[:, 7:14] @ _HAND_POINTS  # still counts here
            read /= _HAND_SCALE_ROW
            values = np.zeros((n, NUM_PLANES - 62), dtype=np.float32)
            values[:, _ROW_PLANES - 62] = read
            white = read[:, PLANE_WHITE - 62] > 0
            black_target, white_target = _DECLARE_TARGET
            targets = np.where(white, white_target, black_target), np.where(white, black_target, white_target)
            for side, (first, planes, camp) in enumerate(((PLANE_NYUGYOKU_US, rows_out[:, 0:14], _CAMP_US),
                                                          (PLANE_NYUGYOKU_THEM, rows_out[:, 31:45], _CAMP_THEM))):
                king_in, count, points = _camp_figures(planes, camp).T
                col = first - 62
                values[:, col] = king_in
                values[:, col + 1] = np.minimum(count, 10.0) / 10.0
                values[:, col + 2] = np.minimum((points + hand_points[side]) / targets[side], 1.0)
            rows_out[:, 62:] = values[:, :, None, None]
            for row, plane, sq in last:
                rows_out[row, plane, sq // 9, sq % 9] = 1.0
        return rows_out

    def encode_into(self, board: cshogi.Board, out: np.ndarray, repetitions: int | None = None) -> None:
        """Fill `out` (100, 9, 9) float32, C-contiguous, with the planes of `board` (a batch of one;
        `repetitions` as in `add`)."""
        _check_buffer(out, (NUM_PLANES, 9, 9))
        self.begin(out[None])
        self.add(board, repetitions)
        self.finish()

    def encode_batch(self, boards: list[cshogi.Board], out: np.ndarray) -> np.ndarray:
        """Encode `boards` into the first len(boards) rows of `out` (B, 100, 9, 9); returns that view."""
        if len(boards) > out.shape[0]:
            raise ValueError(f"{len(boards)} boards do not fit a buffer of {out.shape[0]}")
        self.begin(out)
        for board in boards:
            self.add(board)
        return self.finish()


def input_key(board: cshogi.Board, repetitions: int | None = None) -> tuple[int, int, int, int]:
    """A key that equals for two boards only if their planes are equal: position (Zobrist hash of
    board, hands and side to move), last move, repetition count and the progress plane's ply.

    An evaluation cache keyed on the position alone would hand a transposition reached by another
    move order (another last move, repetition history or ply) the network's output for planes
    it never saw. `repetitions` as in `Encoder.encode_into`.
    """
    reps = repetition_count(board) if repetitions is None else repetitions
    ply = min(board.move_number - 1, int(PROGRESS_PLIES))
    return board.zobrist_hash(), board.peek(), reps, ply


def new_batch_buffer(size: int) -> np.ndarray:
    """A zeroed float32 (size, 100, 9, 9) buffer for `Encoder.encode_batch`."""
    return np.zeros((size, NUM_PLANES, 9, 9), dtype=np.float32)


_DEFAULT_ENCODER = Encoder()


def encode_position(board: cshogi.Board) -> np.ndarray:
    """The (100, 9, 9) float32 planes of `board` (a new array). See the module table."""
    out = np.empty((NUM_PLANES, 9, 9), dtype=np.float32)
    _DEFAULT_ENCODER.encode_into(board, out)
    return out
