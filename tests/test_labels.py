"""Move labels (dlzero.encoding.labels) against cshogi.dlshogi.make_move_label, the oracle."""

from __future__ import annotations

import cshogi
import cshogi.dlshogi as dl
import numpy as np
import pytest
from randpos import MANY_DROPS_SFENS, random_sfens

from dlzero.encoding import (
    NUM_LABELS,
    label_to_move,
    labels_of,
    legal_label_mask,
    legal_moves_and_labels,
    move_to_label,
)
from dlzero.encoding import labels as L


@pytest.fixture(scope="module")
def positions() -> list[str]:
    return random_sfens(3000, seed=11) + MANY_DROPS_SFENS


def test_random_positions_cover_what_labels_must_handle(positions):
    """The sample is only worth something if it holds both colours, promotions, drops of every piece."""
    white = promotions = non_promotions_in_zone = 0
    drop_kinds: set[int] = set()
    for sfen in positions:
        board = cshogi.Board(sfen)
        white += board.turn
        for m in board.legal_moves:
            if cshogi.move_is_drop(m):
                drop_kinds.add(cshogi.move_drop_hand_piece(m))
            elif cshogi.move_is_promotion(m):
                promotions += 1
            elif (cshogi.move_to(m) % 9 <= 2) if board.turn == 0 else (cshogi.move_to(m) % 9 >= 6):
                non_promotions_in_zone += 1
    assert 1000 < white < 2000
    assert promotions > 1000 and non_promotions_in_zone > 1000
    assert drop_kinds == set(range(7))


def test_labels_equal_cshogi_for_every_legal_move(positions):
    total = 0
    for sfen in positions:
        board = cshogi.Board(sfen)
        moves, labels = legal_moves_and_labels(board)
        expected = np.array([dl.make_move_label(int(m), board.turn) for m in moves], dtype=np.int64)
        assert labels.dtype == np.int32
        np.testing.assert_array_equal(labels, expected, err_msg=sfen)
        np.testing.assert_array_equal(labels_of(moves, board.turn), expected)
        # move16 (what hcpe files store) gives the same labels as the full move ints
        np.testing.assert_array_equal(labels_of(np.array([cshogi.move16(int(m)) for m in moves]), board.turn),
                                      expected)
        assert len(set(labels.tolist())) == len(labels), f"two legal moves share a label in {sfen}"
        assert labels.min() >= 0 and labels.max() < NUM_LABELS
        total += len(moves)
    assert total > 100_000


def test_move_to_label_and_inverse(positions):
    for sfen in positions[::10]:
        board = cshogi.Board(sfen)
        mask = legal_label_mask(board)
        legal = list(board.legal_moves)
        assert mask.sum() == len(legal)
        for m in legal:
            label = move_to_label(board, m)
            assert label == dl.make_move_label(m, board.turn)
            assert mask[label]
            assert label_to_move(board, label) == m
        # labels no legal move has map back to 0
        for label in np.nonzero(~mask)[0][:50]:
            assert label_to_move(board, int(label)) == 0


def _label(sfen: str | None, usi: str) -> int:
    board = cshogi.Board(sfen) if sfen else cshogi.Board()
    move = board.move_from_usi(usi)
    assert move in list(board.legal_moves), usi
    assert move_to_label(board, move) == dl.make_move_label(move, board.turn)
    return move_to_label(board, move)


def test_hand_worked_board_moves():
    # dlshogi.md section 2: label = direction * 81 + to_sq, sq = file_idx * 9 + rank_idx
    assert _label(None, "7g7f") == 0 * 81 + (6 * 9 + 5) == 59  # UP
    assert _label(None, "2g2f") == 0 * 81 + (1 * 9 + 5) == 14  # UP
    assert _label(None, "5i4h") == 2 * 81 + (3 * 9 + 7) == 196  # UP_RIGHT
    assert _label(None, "5i6h") == 1 * 81 + (5 * 9 + 7)  # UP_LEFT
    after_7g7f = "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"
    assert _label(after_7g7f, "3c3d") == 59  # White's 3c3d rotates onto Black's 7g7f
    # bishop takes on 2b and promotes: UP_RIGHT + promotion (12), to 2b
    after_3c3d = "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3"
    assert _label(after_3c3d, "8h2b+") == 12 * 81 + (1 * 9 + 1) == 982
    assert _label(after_3c3d, "8h2b") == 2 * 81 + 10  # same move without promotion
    # knight jumps 2i3g (towards file 9: UP2_LEFT) and 8i7g (UP2_RIGHT), once 3g / 7g are empty
    knights = "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P3P2/PP1PPP1PP/1B5R1/LNSGKGSNL b - 1"
    assert _label(knights, "2i3g") == 8 * 81 + (2 * 9 + 6)
    assert _label(knights, "8i7g") == 9 * 81 + (6 * 9 + 6)
    # sideways and backwards
    assert _label(None, "2h3h") == 3 * 81 + (2 * 9 + 7)  # LEFT (towards file 9)
    rook_left = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B2R4/LNSGKGSNL b - 1"
    assert _label(rook_left, "5h4h") == 4 * 81 + (3 * 9 + 7)  # RIGHT
    king_up = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B2K2R1/LNS3SNL b - 1"
    assert _label(king_up, "5h5i") == 5 * 81 + (4 * 9 + 8)  # DOWN
    assert _label(king_up, "5h6i") == 6 * 81 + (5 * 9 + 8)  # DOWN_LEFT
    assert _label(king_up, "5h4i") == 7 * 81 + (3 * 9 + 8)  # DOWN_RIGHT


def test_hand_worked_drops():
    black = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1"
    e5 = 4 * 9 + 4  # 40, the centre: the same square after rotation
    expected = {"P": 20, "L": 21, "N": 22, "S": 23, "B": 24, "R": 25, "G": 26}
    for piece, direction in expected.items():
        assert _label(black, f"{piece}*5e") == direction * 81 + e5
    assert [_label(black, f"{p}*5e") for p in "PBRG"] == [1660, 1984, 2065, 2146]
    # White drops are rotated: 5c (sq 38) is 5g (sq 42) from White's seat
    white = "4k4/9/9/9/9/9/9/9/4K4 w rbgsnlpRB3G3S3N3L17P 1"
    for piece, direction in expected.items():
        assert _label(white, f"{piece}*5c") == direction * 81 + 42


def test_labels_of_empty_and_batch_shapes():
    assert labels_of(np.array([], dtype=np.int64), 0).shape == (0,)
    board = cshogi.Board()
    moves, labels = legal_moves_and_labels(board)
    assert moves.dtype == np.int64 and len(moves) == 30
    assert labels_of(moves.reshape(5, 6), 0).shape == (5, 6)


@pytest.mark.skipif(not L.COMPILED_LABELS, reason="the compiled labels were not built")
def test_compiled_moves_and_labels_are_the_numpy_ones(positions, monkeypatch):
    """The search's path (`legal_moves_and_labels` in C) gives the arrays numpy's fromiter and gather give:
    same moves in cshogi's order, same labels, same dtypes, writeable arrays of their own; a mated position's
    empty lists; a bad table or move list raises."""
    boards = [cshogi.Board(s) for s in positions[:800]] + [cshogi.Board("8k/8G/8G/9/9/9/9/9/K8 w - 1")]
    got = {}
    for compiled in (True, False):
        monkeypatch.setattr(L, "COMPILED_LABELS", compiled)
        got[compiled] = [legal_moves_and_labels(b) for b in boards]
    assert len(got[True][-1][0]) == 0  # mated: no moves
    for (m1, l1), (m0, l0) in zip(got[True], got[False], strict=True):
        assert m1.dtype == m0.dtype == np.int64 and l1.dtype == l0.dtype == np.int32
        assert m1.tobytes() == m0.tobytes() and l1.tobytes() == l0.tobytes()
        assert m1.flags.writeable and l1.flags.writeable
    compiled = L._compiled_moves_and_labels
    row = L._LABEL_ROWS[0]

    def out(n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros(n, np.int64), np.zeros(n, np.int32)

    with pytest.raises(TypeError, match="32768"):
        compiled([1, 2], row[:100], *out(2))
    with pytest.raises(TypeError, match="label_row"):
        compiled([1, 2], row.astype(np.int64), *out(2))
    with pytest.raises(TypeError, match="moves_out"):
        compiled([1, 2], row, np.zeros(2, np.int32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="labels out"):
        compiled([1, 2], row, np.zeros(2, np.int64), np.zeros(3, np.int32))
    with pytest.raises(TypeError):
        compiled(5, row, *out(2))
    with pytest.raises(ValueError, match="more moves"):
        compiled(range(3), row, *out(2))
    with pytest.raises(ValueError, match="1 moves, not the 2"):
        compiled([7], row, *out(2))
