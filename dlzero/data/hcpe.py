"""hcp and hcpe: dlshogi's 32-byte packed positions and 38-byte position+eval+move records.

Layouts (little-endian; `shared/reference/dlshogi.md` 6.4):

    hcp   u8[32]  Huffman-coded position, always exactly 256 bits
    hcpe  hcp u8[32] | eval s16 | bestMove16 u16 | gameResult u8 | padding u8      = 38 bytes

`gameResult` is 0 draw, 1 Black won, 2 White won; hcpe2 files add flag bits 0x4 (repetition),
0x8 (declaration) and 0x10 (max moves), which the reader accepts and returns as stored (mask with
RESULT_MASK for the winner).

Why a decoder of our own (`find_bad_hcp`) when cshogi decodes hcp: cshogi's `Board.set_hcp` trusts
its input. It raises RuntimeError for an unknown Huffman code, but a king square of 81..127 in a
corrupt record makes it write outside the board and crash the process (a bit flip in bit 7 of a
start-position hcp is enough), equal king squares leave a side without a king, and codes that run
past bit 256 make it read past the buffer. `Board.is_ok()` cannot help: it needs the decoded board
and prints to stdout. So readers first check the bit stream here, vectorised over all records, and
only hand structurally sound records to cshogi.
"""

from __future__ import annotations

import os

import cshogi
import numpy as np

from dlzero.data.atomic import atomic_write_bytes
from dlzero.data.regular import read_regular
from dlzero.errors import DataError

HCP_SIZE = 32
HCPE_DTYPE = np.dtype(
    [
        ("hcp", "u1", (HCP_SIZE,)),
        ("eval", "<i2"),
        ("bestMove16", "<u2"),
        ("gameResult", "u1"),
        ("dummy", "u1"),
    ]
)
HCPE_SIZE = HCPE_DTYPE.itemsize  # 38

# gameResult / hcpe3 result: bits 0-1 say who won, bits 2-4 say how the game ended.
RESULT_MASK = 0x3
RESULT_FLAGS_MASK = 0x1C

# Huffman codes as (value, bit count); bit i of `value` is the i-th bit read from the stream.
# Piece kinds: 0 pawn, 1 lance, 2 knight, 3 silver, 4 gold, 5 bishop, 6 rook (colour and promotion
# do not matter for counting). Board codes: empty, then each piece by colour and promotion.
_EMPTY = 7
_BOARD_CODES: dict[tuple[int, int], int] = {
    (0b0, 1): _EMPTY,
    (0b1, 4): 0, (0b101, 4): 0, (0b1001, 4): 0, (0b1101, 4): 0,
    (0b11, 6): 1, (0b10011, 6): 1, (0b100011, 6): 1, (0b110011, 6): 1,
    (0b111, 6): 2, (0b10111, 6): 2, (0b100111, 6): 2, (0b110111, 6): 2,
    (0b1011, 6): 3, (0b11011, 6): 3, (0b101011, 6): 3, (0b111011, 6): 3,
    (0b1111, 6): 4, (0b101111, 6): 4,
    (0b11111, 8): 5, (0b1011111, 8): 5, (0b10011111, 8): 5, (0b11011111, 8): 5,
    (0b111111, 8): 6, (0b1111111, 8): 6, (0b10111111, 8): 6, (0b11111111, 8): 6,
}  # fmt: skip
# Hand codes: Black's, White's, then "in the box" (not on the board nor in a hand), which cshogi
# writes for handicap and tsume positions so that the total stays 256 bits.
_HAND_CODES: dict[tuple[int, int], int] = {
    (0b000, 3): 0, (0b100, 3): 0, (0b010, 3): 0,
    (0b1, 5): 1, (0b10001, 5): 1, (0b01001, 5): 1,
    (0b11, 5): 2, (0b10011, 5): 2, (0b01011, 5): 2,
    (0b101, 5): 3, (0b10101, 5): 3, (0b01101, 5): 3,
    (0b111, 5): 4, (0b10111, 5): 4, (0b11101, 5): 4,
    (0b11111, 7): 5, (0b1011111, 7): 5, (0b0001111, 7): 5,
    (0b111111, 7): 6, (0b1111111, 7): 6, (0b0101111, 7): 6,
}  # fmt: skip
# Every hcp holds the full set of 38 non-king pieces, on the board, in a hand or in the box.
_PIECE_COUNTS = np.array([18, 4, 4, 4, 4, 2, 2], dtype=np.int16)
_WINDOW_BITS = 9  # longer than the longest code, so one table lookup decodes any code
_HCP_CHUNK = 16384

_HCP_REASONS = {
    1: "king square out of range (>= 81; cshogi writes 81 for a missing king, as in tsume problems)",
    2: "both kings on the same square",
    3: "invalid Huffman code",
    4: "Huffman codes do not fill exactly 256 bits",
    5: "wrong number of pieces (a position holds 18 pawns, 4 each of lances, knights, silvers, golds, "
    "2 each of bishops and rooks)",
}


def _lookup_tables(codes: dict[tuple[int, int], int]) -> tuple[np.ndarray, np.ndarray]:
    """Code length and piece kind for every 9-bit window (length 0: no code starts that way)."""
    windows = np.arange(1 << _WINDOW_BITS)
    length = np.zeros(windows.size, np.int64)
    kind = np.full(windows.size, _EMPTY, np.int64)
    for (value, nbits), piece_kind in codes.items():
        hit = (windows & ((1 << nbits) - 1)) == value
        if length[hit].any():
            raise AssertionError(f"Huffman table is not prefix-free at code {value:b}/{nbits}")
        length[hit] = nbits
        kind[hit] = piece_kind
    return length, kind


_BOARD_LEN, _BOARD_KIND = _lookup_tables(_BOARD_CODES)
_HAND_LEN, _HAND_KIND = _lookup_tables(_HAND_CODES)


def _bit_windows(hcps: np.ndarray) -> np.ndarray:
    """(N, 256) array: the 9 bits starting at each bit position, read order in the low bits."""
    bits = np.unpackbits(hcps, axis=1, bitorder="little").astype(np.uint16)
    padded = np.zeros((bits.shape[0], bits.shape[1] + _WINDOW_BITS), np.uint16)
    padded[:, : bits.shape[1]] = bits
    windows = np.zeros_like(bits)
    for i in range(_WINDOW_BITS):
        windows |= padded[:, i : i + bits.shape[1]] << i
    return windows


def _hcp_error_codes(hcps: np.ndarray) -> np.ndarray:
    """Error code (0 = sound, else a key of _HCP_REASONS) for each row of an (N, 32) uint8 array."""
    n = hcps.shape[0]
    windows = _bit_windows(hcps)
    rows = np.arange(n)
    black_king = (windows[:, 1] & 0x7F).astype(np.int64)
    white_king = (windows[:, 8] & 0x7F).astype(np.int64)
    pos = np.full(n, 15, np.int64)
    counts = np.zeros((n, 8), np.int16)
    bad_code = np.zeros(n, bool)
    for sq in range(81):
        active = (black_king != sq) & (white_king != sq)
        w = windows[rows, np.minimum(pos, 255)]
        length = _BOARD_LEN[w]
        bad_code |= active & (length == 0)
        pos += np.where(active, length, 0)
        counts[rows, _BOARD_KIND[w]] += active
    for _ in range(256 // 3):  # hand and box codes are at least 3 bits long
        active = pos < 256
        if not active.any():
            break
        w = windows[rows, np.minimum(pos, 255)]
        length = _HAND_LEN[w]
        bad_code |= active & (length == 0)
        pos = np.where(active & (length == 0), 257, pos + np.where(active, length, 0))
        counts[rows, _HAND_KIND[w]] += active & (length > 0)
    errors = np.zeros(n, np.int8)
    errors[(counts[:, :7] != _PIECE_COUNTS).any(axis=1)] = 5
    errors[pos != 256] = 4
    errors[bad_code] = 3
    errors[black_king == white_king] = 2
    errors[(black_king >= 81) | (white_king >= 81)] = 1
    return errors


def find_bad_hcp(hcps: np.ndarray) -> tuple[int, str] | None:
    """(index, reason) of the first hcp that cshogi must not be given, or None if all are sound.

    `hcps` is an (N, 32) uint8 array (or one (32,) hcp). Checks the bit stream: king squares on the
    board and distinct, every Huffman code valid, exactly 256 bits used, and the full piece set. It
    does not check chess-like legality (pawns on the last rank, a side not to move in check).
    """
    hcps = np.ascontiguousarray(hcps, dtype=np.uint8).reshape(-1, HCP_SIZE)
    for start in range(0, hcps.shape[0], _HCP_CHUNK):
        errors = _hcp_error_codes(hcps[start : start + _HCP_CHUNK])
        bad = np.flatnonzero(errors)
        if bad.size:
            return start + int(bad[0]), _HCP_REASONS[int(errors[bad[0]])]
    return None


def legal_move16s(board: cshogi.Board) -> set[int]:
    """The move16 of every legal move in `board`.

    Membership in this set is the legality test for move16 values read from files: cshogi's
    `Board.is_legal(board.move_from_move16(m))` accepts impossible promotions (7g7f+, a gold or king
    "promoting"), and `move_from_move16` reads outside the board for garbage from-squares.
    """
    return {m & 0xFFFF for m in board.legal_moves}


def format_move16(move16: int) -> str:
    """USI text for a well-formed move16, hex otherwise (cshogi's formatter fails on garbage)."""
    to_sq, from_sq, promote = move16 & 0x7F, (move16 >> 7) & 0x7F, move16 & 0x4000
    board_move = from_sq < 81 and from_sq != to_sq
    well_formed = move16 < 0x8000 and to_sq < 81 and (board_move or (81 <= from_sq <= 87 and not promote))
    return cshogi.move_to_usi(move16) if well_formed else f"0x{move16:04x}"


def bad_result_byte(result):
    """True for a result byte with a winner code of 3 or bits outside the dlshogi flags.

    Works on an int or elementwise on an integer array."""
    return ((result & RESULT_MASK) == 3) | ((result & ~(RESULT_MASK | RESULT_FLAGS_MASK)) != 0)


def read_file_bytes(path: str | os.PathLike[str]) -> bytes:
    """Whole file contents; a missing or unreadable file is a DataError naming it, and so is anything but a
    regular file (`dlzero.data.regular`: a FIFO named like a shard hung every reader)."""
    try:
        return read_regular(path)
    except OSError as e:
        raise DataError(str(path), None, f"cannot read: {e.strerror or e}") from e


def read_hcpe(path: str | os.PathLike[str], validate: bool = True) -> np.ndarray:
    """All records of an hcpe file as a writable HCPE_DTYPE array.

    A size that is not a multiple of 38 is a DataError at the start of the torn tail. With
    `validate`, each record must have a sound hcp, a valid gameResult, and a bestMove16 that is
    legal in its position; the first bad record is a DataError at its byte offset.
    """
    raw = read_file_bytes(path)
    tail = len(raw) % HCPE_SIZE
    if tail:
        raise DataError(
            str(path), len(raw) - tail, f"truncated record: {tail} trailing bytes (hcpe records are 38 bytes)"
        )
    records = np.frombuffer(bytearray(raw), HCPE_DTYPE)
    if validate:
        problem = _first_bad_record(records)
        if problem is not None:
            index, reason = problem
            raise DataError(str(path), index * HCPE_SIZE, f"record {index}: {reason}")
    return records


def _first_bad_record(records: np.ndarray) -> tuple[int, str] | None:
    """(index, reason) of the first invalid hcpe record, or None."""
    found: list[tuple[int, str]] = []
    results = records["gameResult"].astype(np.int64)
    bad_results = np.flatnonzero(bad_result_byte(results))
    if bad_results.size:
        i = int(bad_results[0])
        found.append((i, f"gameResult 0x{results[i]:02x} is not 0, 1 or 2 (plus flags 0x4/0x8/0x10)"))
    bad_hcp = find_bad_hcp(records["hcp"])
    if bad_hcp is not None:
        found.append((bad_hcp[0], f"hcp does not decode: {bad_hcp[1]}"))
    limit = min((i for i, _ in found), default=len(records))
    illegal = _first_illegal_move(records[:limit])
    if illegal is not None:
        found.append(illegal)
    return min(found, default=None)


def _first_illegal_move(records: np.ndarray) -> tuple[int, str] | None:
    """(index, reason) of the first record whose bestMove16 is illegal; hcps must be sound."""
    board = cshogi.Board()
    for i, (hcp, move16) in enumerate(zip(records["hcp"], records["bestMove16"].tolist(), strict=True)):
        board.set_hcp(hcp)
        if move16 not in legal_move16s(board):
            return i, f"bestMove16 {format_move16(move16)} is not legal in {board.sfen()}"
    return None


def write_hcpe(path: str | os.PathLike[str], records: np.ndarray) -> None:
    """Write hcpe records atomically. Accepts HCPE_DTYPE or any dtype with the same field names
    (cshogi's `HuffmanCodedPosAndEval`, whose bestMove16 is int16)."""
    records = np.asarray(records)
    if records.dtype.names != HCPE_DTYPE.names:
        raise TypeError(f"write_hcpe: records need fields {HCPE_DTYPE.names}, got {records.dtype}")
    atomic_write_bytes(path, np.ascontiguousarray(records.astype(HCPE_DTYPE, copy=False)).tobytes())
