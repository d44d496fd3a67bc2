"""Input planes (dlzero.encoding.features).

Planes 0-61 are checked against two oracles: cshogi.dlshogi.make_input_features (what dlshogi feeds
its networks) and an independent re-derivation from python-shogi's board and attack generator.
Planes 62-99 are checked on hand-worked positions, plane by plane, as documented in the module.
"""

from __future__ import annotations

import cshogi
import cshogi.dlshogi as dl
import numpy as np
import pytest
import shogi
from randpos import MANY_DROPS_SFENS, board_from_moves, random_histories, random_sfens

from dlzero.encoding import NUM_PLANES, Encoder, encode_position, new_batch_buffer
from dlzero.encoding import features as F

# python-shogi piece type -> dlshogi piece-plane index (P L N S B R G K +P +L +N +S +B +R)
_DL_INDEX = {
    shogi.PAWN: 0, shogi.LANCE: 1, shogi.KNIGHT: 2, shogi.SILVER: 3, shogi.BISHOP: 4, shogi.ROOK: 5,
    shogi.GOLD: 6, shogi.KING: 7, shogi.PROM_PAWN: 8, shogi.PROM_LANCE: 9, shogi.PROM_KNIGHT: 10,
    shogi.PROM_SILVER: 11, shogi.PROM_BISHOP: 12, shogi.PROM_ROOK: 13,
}


def _dl_square(ps: int) -> int:
    """python-shogi square (0 = 9a, row-major from Black's left) -> dlshogi sq = file_idx * 9 + rank_idx."""
    rank_idx, file_idx = ps // 9, 8 - ps % 9
    return file_idx * 9 + rank_idx


def oracle_planes(sfen: str) -> np.ndarray:
    """Planes 0-61 derived from python-shogi: pieces, attacks per attacker type, attacker counts."""
    board = shogi.Board(sfen)
    us = board.turn
    out = np.zeros((62, 81), dtype=np.float32)
    for ps in range(81):
        sq = _dl_square(ps)
        if us == shogi.WHITE:
            sq = 80 - sq
        piece = board.piece_at(ps)
        if piece is not None:
            out[31 * (piece.color != us) + _DL_INDEX[piece.piece_type], sq] = 1.0
        for slot, colour in ((0, us), (1, us ^ 1)):
            attackers = list(board.attackers(colour, ps))
            for a in attackers:
                out[31 * slot + 14 + _DL_INDEX[board.piece_type_at(a)], sq] = 1.0
            out[31 * slot + 28: 31 * slot + 28 + min(len(attackers), 3), sq] = 1.0
    return out.reshape(62, 9, 9)


def test_square_mapping_of_the_oracle():
    assert shogi.SQUARE_NAMES[0] == "9a" and shogi.SQUARE_NAMES[80] == "1i"
    assert _dl_square(shogi.SQUARE_NAMES.index("1a")) == 0
    assert _dl_square(shogi.SQUARE_NAMES.index("9i")) == 80
    assert _dl_square(shogi.SQUARE_NAMES.index("7f")) == 59


def test_planes_0_61_against_python_shogi_oracle():
    sfens = random_sfens(500, seed=31) + MANY_DROPS_SFENS + [cshogi.STARTING_SFEN]
    assert sum(cshogi.Board(s).turn for s in sfens) > 100  # both sides to move
    seen = np.zeros(62, dtype=bool)
    in_check = 0
    for sfen in sfens:
        planes = encode_position(cshogi.Board(sfen))
        np.testing.assert_array_equal(planes[:62], oracle_planes(sfen), err_msg=sfen)
        seen |= planes[:62].reshape(62, -1).any(axis=1)
        in_check += int(planes[76, 0, 0])
    # the sample exercises every plane: all 14 piece kinds of both sides, their attacks, 3+ attackers
    assert seen.all(), np.nonzero(~seen)[0]
    assert in_check >= 10


def test_planes_0_61_against_cshogi_dlshogi():
    enc = Encoder()
    out = np.empty((NUM_PLANES, 9, 9), dtype=np.float32)
    f1 = np.empty((62, 9, 9), dtype=np.float32)
    f2 = np.empty((dl.FEATURES2_NUM, 9, 9), dtype=np.float32)
    for sfen in random_sfens(3000, seed=32):
        board = cshogi.Board(sfen)
        dl.make_input_features(board, f1, f2)
        enc.encode_into(board, out)
        np.testing.assert_array_equal(out[:62], f1, err_msg=sfen)
        assert out[76, 0, 0] == f2[56, 0, 0]  # check plane


def test_start_position_planes_by_hand():
    planes = encode_position(cshogi.Board())
    # own pawns on rank g (rank_idx 6) of every file; the opponent's on rank c
    assert np.array_equal(planes[0], np.eye(9)[[6] * 9])
    assert np.array_equal(planes[31], np.eye(9)[[2] * 9])
    assert [int(planes[t].sum()) for t in range(14)] == [9, 2, 2, 2, 1, 1, 2, 1, 0, 0, 0, 0, 0, 0]
    assert [int(planes[p].sum()) for p in (28, 29, 30)] == [30, 12, 6]
    assert planes[7, 4, 8] == 1  # own king on 5i: file_idx 4, rank_idx 8
    assert planes[5, 1, 7] == 1 and planes[4, 7, 7] == 1  # rook 2h, bishop 8h
    # the position is symmetric, so both sides' 31 planes are the 180-degree rotation of each other
    assert np.array_equal(planes[:31], planes[31:62, ::-1, ::-1])


def test_white_to_move_is_rotated_and_colour_swapped():
    board = cshogi.Board()
    board.push_usi("7g7f")
    planes = encode_position(board)
    # White's own pawns look like Black's at the start; Black's moved pawn (7f) shows at file 3, rank d
    assert np.array_equal(planes[0], np.eye(9)[[6] * 9])
    assert planes[31, 2, 3] == 1 and planes[31, 2, 2] == 0
    assert planes[31].sum() == 9


# ---- planes 62-99 ---------------------------------------------------------------------------------


def _planes(sfen: str) -> np.ndarray:
    return encode_position(cshogi.Board(sfen))


def _scalar(planes: np.ndarray, p: int) -> float:
    """The value of a broadcast plane (asserting that it is one value over the board)."""
    assert np.all(planes[p] == planes[p, 0, 0]), f"plane {p} is not constant"
    return float(planes[p, 0, 0])


def test_hand_planes():
    black = _planes("4k4/9/9/9/9/9/9/9/4K4 b RBGSNLPrb3g3s3n3l17p 1")
    us = [_scalar(black, p) for p in range(62, 69)]
    them = [_scalar(black, p) for p in range(69, 76)]
    np.testing.assert_allclose(us, [1 / 18, 1 / 4, 1 / 4, 1 / 4, 1 / 4, 1 / 2, 1 / 2])  # P L N S G B R
    np.testing.assert_allclose(them, [17 / 18, 3 / 4, 3 / 4, 3 / 4, 3 / 4, 1 / 2, 1 / 2])
    white = _planes("4k4/9/9/9/9/9/9/9/4K4 w RBGSNLPrb3g3s3n3l17p 1")  # same hands, White to move
    np.testing.assert_allclose([_scalar(white, p) for p in range(62, 69)], them)
    np.testing.assert_allclose([_scalar(white, p) for p in range(69, 76)], us)
    full = _planes("k8/9/9/9/9/9/9/9/8K b 2R2B4G4S4N4L18P 1")  # 18 pawns: not capped at 8 as in dlshogi
    assert [_scalar(full, p) for p in range(62, 69)] == [1.0] * 7
    assert [_scalar(full, p) for p in range(69, 76)] == [0.0] * 7
    assert not _planes(cshogi.STARTING_SFEN)[62:76].any()


def test_check_plane():
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K3r b - 1"), 76) == 1.0  # rook on 1i checks along rank i
    assert _scalar(_planes("4k3R/9/9/9/9/9/9/9/4K4 w - 1"), 76) == 1.0
    assert _scalar(_planes("4k4/9/9/9/9/9/9/3K5/8r b - 1"), 76) == 0.0  # king on 6h, out of line
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 b N 1"), 76) == 0.0


def test_repetition_planes_count_earlier_occurrences():
    board = cshogi.Board("4k4/4g4/9/9/9/9/9/4G4/4K4 b - 1")
    seen = []
    for _ in range(4):
        for usi in ("5h4h", "5b6b", "4h5h", "6b5b"):
            board.push_usi(usi)
            seen.append(encode_position(board)[77:80, 0, 0].tolist())
    # after each full cycle the start position (and, a cycle later, each position) recurs
    assert seen[:3] == [[0, 0, 0]] * 3
    assert seen[3] == [1, 0, 0]  # back at the start: seen once before
    assert seen[4:7] == [[1, 0, 0]] * 3
    assert seen[7] == [1, 1, 0]
    assert seen[11] == [1, 1, 1]
    assert seen[15] == [1, 1, 1]  # capped at 3
    # the planes are whole-board constants
    planes = encode_position(board)
    assert all(_scalar(planes, p) == 1.0 for p in (77, 78, 79))
    # the encoder leaves the board's history as it found it
    assert len(board.history) == 16 and board.sfen() == "4k4/4g4/9/9/9/9/9/4G4/4K4 b - 17"


def test_repetition_needs_the_same_side_to_move():
    board = cshogi.Board("4k4/9/9/9/9/9/9/9/4K4 b - 1")
    for usi in ("5i5h", "5a5b", "5h4h", "5b5a", "4h5i"):  # Black's king walks a triangle
        board.push_usi(usi)
    assert board.sfen().split()[0] == "4k4/9/9/9/9/9/9/9/4K4"  # the start board, but White to move
    assert not encode_position(board)[77:80].any()
    for usi in ("5a5b", "5i5h", "5b5a"):  # after 5b5a: the board of ply 1 with the other side to move
        board.push_usi(usi)
        assert not encode_position(board)[77:80].any()
    board.push_usi("5h5i")  # ply 5 recurs (same board, same side): once
    assert encode_position(board)[77:80, 0, 0].tolist() == [1, 0, 0]
    # a position from a bare SFEN has no history: no repetition
    assert not _planes("4k4/9/9/9/9/9/9/9/4K4 b - 9")[77:80].any()


def test_white_and_progress_planes():
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 b - 1"), 80) == 0.0
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 w - 2"), 80) == 1.0
    assert _scalar(_planes(cshogi.STARTING_SFEN), 81) == 0.0
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 b - 257"), 81) == 0.5
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 w - 129"), 81) == 0.25
    assert _scalar(_planes("4k4/9/9/9/9/9/9/9/4K4 b - 2000"), 81) == 1.0
    board = cshogi.Board()
    for usi in ("7g7f", "3c3d", "2g2f"):
        board.push_usi(usi)
    assert _scalar(encode_position(board), 81) == pytest.approx(3 / 512)


NYUGYOKU_CASES = [
    # sfen, planes 82-85 (us: king in camp, pieces in camp/10, points/target, can declare), 86-88 (them)
    # Black king 9a, 6 tokins in camp, R B 2G in hand: 6 pieces, 6 + 5 + 5 + 2 = 18 points of 28
    ("K8/+P+P+P+P+P+P3/9/9/4k4/9/9/9/9 b RB2G 1", [1, 0.6, 18 / 28, 0], [0, 0, 0]),
    # 10 tokins, R B 4G 4S in hand: 10 pieces, 28 points: Black can declare
    ("4K4/+P+P+P+P+P+P+P+P+P/+P8/9/4k4/9/9/9/9 b RB4G4S 1", [1, 1, 1, 1], [0, 0, 0]),
    # one silver less: 27 points are not enough for Black
    ("4K4/+P+P+P+P+P+P+P+P+P/+P8/9/4k4/9/9/9/9 b RB4G3S 1", [1, 1, 27 / 28, 0], [0, 0, 0]),
    # the same position with White to move: Black's figures move to the opponent planes
    ("4K4/+P+P+P+P+P+P+P+P+P/+P8/9/4k4/9/9/9/9 w RB4G4S 1", [0, 0, 0, 0], [1, 1, 1]),
    # White needs only 27 points
    ("9/9/9/9/4K4/9/+p8/+p+p+p+p+p+p+p+p+p/4k4 w rb4g3s 1", [1, 1, 1, 1], [0, 0, 0]),
    ("9/9/9/9/4K4/9/+p8/+p+p+p+p+p+p+p+p+p/4k4 w rb4g2s 1", [1, 1, 26 / 27, 0], [0, 0, 0]),
    # a white king deep in Black's camp is White's entering king (opponent planes with Black to move)
    ("4K4/9/9/9/9/9/9/9/4k4 b - 1", [1, 0, 0, 0], [1, 0, 0]),
    # king outside the camp: pieces and points still count; more than 10 pieces cap at 1
    ("9/+P+P+P+P+P+P+P+P+P/+P+P6+B/9/4K4/9/9/9/4k4 b - 1", [0, 1, 16 / 28, 0], [1, 0, 0]),
    ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", [0, 0, 0, 0], [0, 0, 0]),
]


@pytest.mark.parametrize("sfen,us,them", NYUGYOKU_CASES)
def test_entering_king_planes(sfen, us, them):
    board = cshogi.Board(sfen)
    planes = encode_position(board)
    np.testing.assert_allclose([_scalar(planes, p) for p in range(82, 86)], us, rtol=1e-6)
    np.testing.assert_allclose([_scalar(planes, p) for p in range(86, 89)], them, rtol=1e-6)
    assert planes[85, 0, 0] == float(board.is_nyugyoku())
    assert not planes[89].any()


def _oracle_entering_king(sfen: str) -> tuple[list[float], list[float]]:
    """Planes 82-84 and 86-88 worked out square by square on python-shogi's board: king in the enemy
    camp, other pieces there /10 (capped), declaration points (5 per rook/bishop, promoted or not,
    1 per other piece, in the camp or in hand) / the target (28 Black, 27 White), capped."""
    board = shogi.Board(sfen)
    big = {shogi.BISHOP, shogi.ROOK, shogi.PROM_BISHOP, shogi.PROM_ROOK}
    figures = []
    for colour in (board.turn, board.turn ^ 1):
        king = count = points = 0
        for ps in range(81):
            piece = board.piece_at(ps)
            in_camp = ps // 9 <= 2 if colour == shogi.BLACK else ps // 9 >= 6
            if piece is None or piece.color != colour or not in_camp:
                continue
            if piece.piece_type == shogi.KING:
                king = 1
            else:
                count += 1
                points += 5 if piece.piece_type in big else 1
        points += sum((5 if t in big else 1) * k for t, k in board.pieces_in_hand[colour].items())
        target = 28 if colour == shogi.BLACK else 27
        figures.append([float(king), min(count, 10) / 10, min(points / target, 1.0)])
    return figures[0], figures[1]


def test_entering_king_planes_against_python_shogi_in_one_batch():
    """Planes 82-88 are worked out for a whole batch at once from the piece planes: every row of a
    batch mixing sides to move must match the square-by-square count on python-shogi's board."""
    sfens = [s for s, _, _ in NYUGYOKU_CASES] + random_sfens(120, seed=21, max_ply=220) + MANY_DROPS_SFENS
    boards = [cshogi.Board(s) for s in sfens]
    assert {b.turn for b in boards} == {cshogi.BLACK, cshogi.WHITE}
    planes = Encoder().encode_batch(boards, new_batch_buffer(len(boards)))
    seen_pieces_in_camp = 0
    for sfen, row in zip(sfens, planes, strict=True):
        us, them = _oracle_entering_king(sfen)
        np.testing.assert_allclose(row[82:85, 0, 0], us, rtol=1e-6, err_msg=sfen)
        np.testing.assert_allclose(row[86:89, 0, 0], them, rtol=1e-6, err_msg=sfen)
        seen_pieces_in_camp += us[1] > 0
    assert seen_pieces_in_camp >= 20  # the random games do bring pieces into the camps


def test_last_move_planes():
    board = cshogi.Board()
    assert not encode_position(board)[90:92].any()  # no history
    board.push_usi("7g7f")  # Black's move, White to move: rotated
    planes = encode_position(board)
    assert np.argwhere(planes[90]).tolist() == [[2, 3]]  # 7f -> 80 - 59 = 21 = file_idx 2, rank_idx 3
    assert np.argwhere(planes[91]).tolist() == [[2, 2]]  # 7g -> 80 - 60 = 20
    board.push_usi("3c3d")  # White's move, Black to move: as is
    planes = encode_position(board)
    assert np.argwhere(planes[90]).tolist() == [[2, 3]]  # 3d
    assert np.argwhere(planes[91]).tolist() == [[2, 2]]  # 3c
    for usi in ("8h2b+", "3a2b"):
        board.push_usi(usi)
    board.push_usi("B*4e")  # Black drops: White to move, rotated, no origin
    planes = encode_position(board)
    assert np.argwhere(planes[90]).tolist() == [[5, 4]]  # 4e = sq 31 -> 49 = file_idx 5, rank_idx 4
    assert not planes[91].any()
    board.push_usi("B*6e")  # White drops: Black to move, as is
    planes = encode_position(board)
    assert np.argwhere(planes[90]).tolist() == [[5, 4]]  # 6e = sq 49
    assert not planes[91].any()


def test_reserved_planes_are_zero_and_values_bounded():
    enc = Encoder()
    buf = np.empty((NUM_PLANES, 9, 9), dtype=np.float32)
    for moves in random_histories(150, seed=33, max_ply=200):
        enc.encode_into(board_from_moves(moves), buf)
        assert not buf[89].any() and not buf[92:].any()
        assert buf.min() >= 0.0 and buf.max() <= 1.0
        for p in range(62, 90):
            assert np.all(buf[p] == buf[p, 0, 0])
        assert buf[90].sum() == 1.0 and buf[91].sum() in (0.0, 1.0)


def test_batch_equals_single_and_buffers_are_reused_cleanly():
    boards = [board_from_moves(m) for m in random_histories(40, seed=34, max_ply=150)]
    single = np.stack([encode_position(b) for b in boards])
    enc = Encoder()
    buf = new_batch_buffer(64)
    assert buf.shape == (64, NUM_PLANES, 9, 9) and buf.dtype == np.float32
    buf.fill(7.0)  # garbage from an earlier use
    view = enc.encode_batch(boards, buf)
    assert view.shape == (40, NUM_PLANES, 9, 9) and np.shares_memory(view, buf)
    np.testing.assert_array_equal(view, single)
    assert np.all(buf[40:] == 7.0)  # rows past the batch are not touched
    # reuse the same buffer for other positions in reverse order: no stale values
    view = enc.encode_batch(boards[::-1], buf)
    np.testing.assert_array_equal(view, single[::-1])
    # one row reused across very different positions (full hands, check, entering king, last move)
    row = np.full((NUM_PLANES, 9, 9), 3.0, dtype=np.float32)
    sequence = [*NYUGYOKU_CASES, (MANY_DROPS_SFENS[2], None, None), (cshogi.STARTING_SFEN, None, None)]
    for sfen, _, _ in sequence:
        enc.encode_into(boards[7], row)
        enc.encode_into(cshogi.Board(sfen), row)
        np.testing.assert_array_equal(row, encode_position(cshogi.Board(sfen)))
    with pytest.raises(ValueError):
        enc.encode_batch(boards, new_batch_buffer(10))


def test_rows_added_one_board_at_a_time_keep_their_own_planes():
    """The search adds a leaf while its board is at that position and then moves the same board on:
    each row must hold the position it was added at, not the board's state at `finish`."""
    moves = random_histories(1, seed=35, max_ply=120)[0]
    board, expected = cshogi.Board(), []
    enc = Encoder()
    buf = new_batch_buffer(len(moves))
    buf.fill(5.0)
    enc.begin(buf)
    for k, move in enumerate(moves):
        board.push(move)
        assert enc.add(board) == k
        expected.append(encode_position(board))
    np.testing.assert_array_equal(enc.finish(), np.stack(expected))
    with pytest.raises(ValueError, match="no batch begun"):
        enc.add(board)  # finish closed the batch
    enc.begin(buf[:1])
    enc.add(board)
    with pytest.raises(ValueError, match="full"):
        enc.add(board)


def test_encode_position_returns_fresh_arrays():
    a = encode_position(cshogi.Board())
    b = encode_position(cshogi.Board(MANY_DROPS_SFENS[0]))
    assert not np.shares_memory(a, b)
    assert np.array_equal(a, encode_position(cshogi.Board()))
    assert a.shape == (F.NUM_PLANES, 9, 9) and a.dtype == np.float32 and a.flags.c_contiguous


def test_wrong_buffers_are_refused_not_filled_with_garbage():
    """cshogi writes through the raw pointer: a float64, float16, strided or Fortran-order buffer would
    be silently misfilled (or overrun), so the encoder refuses them."""
    enc = Encoder()
    board = cshogi.Board()
    bad = [
        np.zeros((NUM_PLANES, 9, 9), dtype=np.float64),
        np.zeros((NUM_PLANES, 9, 9), dtype=np.float16),
        np.zeros((NUM_PLANES, 9, 18), dtype=np.float32)[:, :, ::2],
        np.asfortranarray(np.zeros((NUM_PLANES, 9, 9), dtype=np.float32)),
        np.zeros((62, 9, 9), dtype=np.float32),
        np.zeros((NUM_PLANES, 81), dtype=np.float32),
    ]
    for buf in bad:
        before = buf.copy()
        with pytest.raises(ValueError, match="float32"):
            enc.encode_into(board, buf)
        assert np.array_equal(buf, before)
    with pytest.raises(ValueError, match="float32"):
        enc.encode_batch([board], np.zeros((4, NUM_PLANES, 9, 9), dtype=np.float64))
    with pytest.raises(ValueError, match="float32"):
        enc.encode_batch([board], new_batch_buffer(8)[::2])
    # a contiguous prefix of a batch buffer is fine
    buf = new_batch_buffer(8)
    enc.encode_batch([board, board], buf[:3])
    assert np.array_equal(buf[0], encode_position(board)) and not buf[2].any()


def test_the_compiled_planes_are_built_where_a_c_compiler_is():
    """Like the search's rule: optional at install time, but on a machine with a compiler (CI's) a missing
    build would quietly leave the encoder on numpy."""
    import shutil
    import sysconfig

    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) on this machine: the numpy planes are the only ones")
    assert F.COMPILED_PLANES, "dlzero.encoding._planes was not built: reinstall (pip install -e .)"


@pytest.mark.skipif(not F.COMPILED_PLANES, reason="the compiled planes were not built")
def test_compiled_planes_are_the_numpy_planes_bit_for_bit(monkeypatch):
    """Random games (captures, promotions, drops, both sides to move, repetitions counted from the history),
    full hands, entering kings, with and without a last move: every plane of every row is the same float
    whether `add` writes planes 62-99 in C or `finish` writes them in numpy, in a reused dirty buffer."""
    histories = random_histories(60, seed=36, max_ply=200)
    boards = [board_from_moves(m) for m in histories]
    boards += [cshogi.Board(s) for s in [*MANY_DROPS_SFENS, *(c[0] for c in NYUGYOKU_CASES)]]
    reps = [None] * len(histories) + [0, 1, 2, 3] * 10
    reps = reps[: len(boards)]
    encoded = {}
    for compiled in (True, False):
        monkeypatch.setattr(F, "COMPILED_PLANES", compiled)
        buf = new_batch_buffer(len(boards))
        buf.fill(np.nan)
        enc = Encoder()
        enc.begin(buf)
        for board, r in zip(boards, reps, strict=True):
            enc.add(board, r)
        encoded[compiled] = enc.finish().copy()
    assert not np.isnan(encoded[True]).any()
    assert encoded[True].tobytes() == encoded[False].tobytes()
    # the rows compared hold every kind of value planes 62-99 can (the hand-worked tests above check what
    # they mean, on the compiled path by default)
    got = encoded[True][:, :, 0, 0]
    for plane in (F.PLANE_HAND_US, F.PLANE_HAND_THEM, F.PLANE_CHECK, F.PLANE_REPETITION + 2, F.PLANE_WHITE,
                  F.PLANE_NYUGYOKU_US, F.PLANE_NYUGYOKU_US + 3, F.PLANE_NYUGYOKU_THEM + 2):
        assert got[:, plane].max() > 0, plane
    assert encoded[True][:, F.PLANE_LAST_FROM].sum() > 0 and 0 < encoded[True][:, F.PLANE_LAST_TO].sum() < len(boards)


@pytest.mark.skipif(not F.COMPILED_PLANES, reason="the compiled planes were not built")
def test_compiled_planes_refuse_what_they_cannot_fill():
    fill = F._compiled_fill_board_row
    batch = np.zeros((2, NUM_PLANES, 9, 9), np.float32)
    f2 = np.zeros((dl.FEATURES2_NUM, 9, 9), np.float32)
    board = cshogi.Board()
    before = batch.copy()
    with pytest.raises(TypeError, match="100, 9, 9"):
        fill(batch.astype(np.float64), 0, board, f2, 0)
    with pytest.raises(TypeError, match="100, 9, 9"):
        fill(batch[:, :50].copy(), 0, board, f2, 0)
    with pytest.raises(TypeError, match="features2"):
        fill(batch, 0, board, f2[:10], 0)
    for row in (-1, 2):
        with pytest.raises(IndexError, match="outside the batch"):
            fill(batch, row, board, f2, 0)
    with pytest.raises(ValueError, match="0..3"):
        fill(batch, 0, board, f2, 4)
    with pytest.raises(AttributeError):
        fill(batch, 0, object(), f2, 0)
    with pytest.raises(TypeError, match="5 arguments"):
        fill(batch, 0, board)
    assert batch.tobytes() == before.tobytes()  # nothing written by a refused call
