"""hcp/hcpe: exact round trips, cshogi's own dtype, and rejection of torn or corrupt files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import cshogi
import cshogi.KIF
import numpy as np
import pytest
from randpos import MANY_DROPS_SFENS, random_histories

from dlzero.data.hcpe import HCPE_DTYPE, HCPE_SIZE, find_bad_hcp, legal_move16s, read_hcpe, write_hcpe
from dlzero.errors import DataError

REPO = Path(__file__).resolve().parents[1]


def hcpe_records(n_games: int = 12, seed: int = 7) -> np.ndarray:
    """Every position of random games (plus drop-heavy starts) with the move played and a result."""
    rng = np.random.default_rng(seed)
    rows = []
    starts = [(cshogi.STARTING_SFEN, moves) for moves in random_histories(n_games, seed, max_ply=120)]
    starts += [(sfen, None) for sfen in MANY_DROPS_SFENS]
    for sfen, moves in starts:
        board = cshogi.Board(sfen)
        for ply in range(len(moves) if moves is not None else 6):
            legal = list(board.legal_moves)
            if not legal:
                break
            move = moves[ply] if moves is not None else legal[rng.integers(len(legal))]
            row = np.zeros((), HCPE_DTYPE)
            board.to_hcp(row["hcp"])
            row["eval"] = rng.integers(-30000, 30001)
            row["bestMove16"] = cshogi.move16(move)
            row["gameResult"] = rng.choice([0, 1, 2, 1 | 0x8, 0x4, 0x10])
            rows.append(row)
            board.push(move)
    return np.array(rows, HCPE_DTYPE)


@pytest.fixture(scope="module")
def records() -> np.ndarray:
    recs = hcpe_records()
    moves = recs["bestMove16"].astype(np.int64)
    assert ((moves >> 7) & 0x7F >= 81).any(), "test data should contain drops"
    assert (moves & 0x4000).any(), "test data should contain promotions"
    return recs


def test_dtype_is_dlshogi_layout_and_matches_cshogi():
    ours, theirs = HCPE_DTYPE, cshogi.HuffmanCodedPosAndEval
    assert ours.itemsize == theirs.itemsize == HCPE_SIZE == 38
    assert ours.names == theirs.names
    assert [ours.fields[n][1] for n in ours.names] == [theirs.fields[n][1] for n in theirs.names]
    assert [ours.fields[n][1] for n in ours.names] == [0, 32, 34, 36, 37]


def test_round_trip_is_exact(tmp_path, records):
    path = tmp_path / "a.hcpe"
    write_hcpe(path, records)
    assert path.stat().st_size == len(records) * 38
    back = read_hcpe(path)
    assert back.dtype == HCPE_DTYPE
    assert back.tobytes() == records.tobytes()
    assert back.flags.writeable
    board = cshogi.Board()
    for row in back[::7]:
        board.set_hcp(row["hcp"])
        assert int(row["bestMove16"]) in legal_move16s(board)


def test_cshogi_reads_our_file_and_we_read_cshogis(tmp_path, records):
    path = tmp_path / "a.hcpe"
    write_hcpe(path, records)
    theirs = np.fromfile(path, cshogi.HuffmanCodedPosAndEval)
    assert np.array_equal(theirs["hcp"], records["hcp"])
    assert np.array_equal(theirs["bestMove16"].astype(np.uint16), records["bestMove16"])
    write_hcpe(tmp_path / "b.hcpe", theirs)  # cshogi's dtype (int16 bestMove16) is accepted
    assert (tmp_path / "b.hcpe").read_bytes() == path.read_bytes()


def test_hcp_matches_cshogi_board(records):
    board = cshogi.Board()
    for row in records[::5]:
        board.set_hcp(row["hcp"])
        again = np.zeros(32, np.uint8)
        board.to_hcp(again)
        assert np.array_equal(again, row["hcp"])
    assert find_bad_hcp(records["hcp"]) is None


def test_handicap_hcps_with_pieces_in_the_box_are_sound_and_kingless_ones_are_not():
    hcps = []
    for sfen in [s for s in cshogi.KIF.Parser.HANDYCAP_SFENS.values() if s]:
        hcp = np.zeros(32, np.uint8)
        cshogi.Board(sfen).to_hcp(hcp)
        hcps.append(hcp)
    hcps = np.array(hcps)
    assert find_bad_hcp(hcps) is None
    cshogi.Board("7pk/7p1/7p1/7p1/7p1/7p1/7p1/7p1/7p1 b 4L2R4n4s 1").to_hcp(hcps[3])  # tsume: no Black king
    index, reason = find_bad_hcp(hcps)
    assert index == 3 and "king square" in reason


@pytest.mark.parametrize("cut", [1, 37, 38 * 5 + 1, -1])
def test_truncated_file_is_rejected_at_the_torn_record(tmp_path, records, cut):
    path = tmp_path / "t.hcpe"
    write_hcpe(path, records)
    size = cut if cut > 0 else path.stat().st_size + cut
    path.write_bytes(path.read_bytes()[:size])
    with pytest.raises(DataError) as err:
        read_hcpe(path)
    assert err.value.offset == size // 38 * 38
    assert str(path) in str(err.value) and "truncated" in str(err.value)


def corrupt(tmp_path: Path, records: np.ndarray, index: int, field: str, value) -> Path:
    bad = records.copy()
    bad[field][index] = value
    path = tmp_path / f"bad-{field}.hcpe"
    write_hcpe(path, bad)
    return path


def test_bad_result_byte_is_rejected(tmp_path, records):
    with pytest.raises(DataError, match="gameResult") as err:
        read_hcpe(corrupt(tmp_path, records, 9, "gameResult", 3))
    assert err.value.offset == 9 * 38


def test_illegal_move_is_rejected_including_bogus_promotions(tmp_path, records):
    start = np.flatnonzero(records["bestMove16"] == cshogi.move16(cshogi.Board().move_from_usi("7g7f")))[0]
    seven_g_seven_f_promoting = records["bestMove16"][start] | 0x4000  # cshogi's is_legal accepts this
    with pytest.raises(DataError, match="not legal") as err:
        read_hcpe(corrupt(tmp_path, records, start, "bestMove16", seven_g_seven_f_promoting))
    assert err.value.offset == start * 38
    with pytest.raises(DataError) as err:
        read_hcpe(corrupt(tmp_path, records, 20, "bestMove16", 0xFFFF))
    assert err.value.offset == 20 * 38


def test_king_square_bit_flip_is_rejected_without_crashing(tmp_path, records):
    flipped = records["hcp"][30].copy()
    flipped[0] ^= 0x80  # bit 7: the top bit of Black's king square -> 64 + square, off the board
    with pytest.raises(DataError, match="king square") as err:
        read_hcpe(corrupt(tmp_path, records, 30, "hcp", flipped))
    assert err.value.offset == 30 * 38


def test_garbage_is_rejected(tmp_path):
    path = tmp_path / "garbage.hcpe"
    path.write_bytes(np.random.default_rng(3).integers(0, 256, 38 * 50, dtype=np.uint8).tobytes())
    with pytest.raises(DataError, match="record 0"):
        read_hcpe(path)
    assert len(read_hcpe(path, validate=False)) == 50


def test_missing_file_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read") as err:
        read_hcpe(tmp_path / "nope.hcpe")
    assert err.value.offset is None


def test_empty_file_has_no_records(tmp_path):
    (tmp_path / "e.hcpe").write_bytes(b"")
    assert len(read_hcpe(tmp_path / "e.hcpe")) == 0


FUZZ = textwrap.dedent(
    """
    import sys
    import cshogi, numpy as np
    from dlzero.data.hcpe import _hcp_error_codes
    hcps = np.load(sys.argv[1])
    rng = np.random.default_rng(5)
    n = 30000
    mutated = hcps[rng.integers(0, len(hcps), n)].copy()
    for k in range(3):
        bit = rng.integers(0, 256, n)
        sel = rng.random(n) < (1.0 if k == 0 else 0.5)
        mutated[sel, bit[sel] // 8] ^= (1 << (bit[sel] % 8)).astype(np.uint8)
    mutated = np.concatenate([mutated, rng.integers(0, 256, (5000, 32), dtype=np.uint8)])
    errors = _hcp_error_codes(mutated)
    board = cshogi.Board()
    for hcp in mutated[errors == 0]:
        board.set_hcp(hcp)  # must neither raise nor crash
        for move in list(board.legal_moves)[:4]:
            board.push(move)
            board.pop()
    print(int((errors == 0).sum()))
    """
)


def test_sound_hcps_never_crash_cshogi(tmp_path, records):
    """Mutated hcps that pass find_bad_hcp are safe for cshogi (run in a child: a miss would segfault)."""
    np.save(tmp_path / "hcps.npy", records["hcp"])
    proc = subprocess.run(
        [sys.executable, "-c", FUZZ, str(tmp_path / "hcps.npy")],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) > 1000  # many mutations still decode, and all of those were safe
