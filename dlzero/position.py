"""Positions from text: SFEN and USI `position` strings, validated before cshogi sees them.

cshogi aborts the whole process on some malformed SFEN strings and silently accepts impossible
positions (no king, three rooks, a pawn on the last rank). Engines and tools take positions from
users and GUIs, so everything here checks the text first and raises `PositionError` naming what is
wrong; only then is the position handed to cshogi.
"""

from __future__ import annotations

import re

import cshogi

from dlzero.errors import PositionError

STARTPOS_SFEN = cshogi.STARTING_SFEN

# Most pieces of each kind a position can hold (board + hands, both sides, promoted counted).
_PIECE_LIMITS = {"P": 18, "L": 4, "N": 4, "S": 4, "G": 4, "B": 2, "R": 2, "K": 2}
_PROMOTABLE = set("PLNSBR")
_HAND_KINDS = set("PLNSGBR")
_HAND_RE = re.compile(r"(\d*)([PLNSGBRplnsgbr])")
# The largest SFEN move number taken: far beyond any game (DrawPly's largest value, 10^6, included)
# and far from cshogi's C int, which 2^31 - 1 plus the moves after it overflowed.
MAX_MOVE_NUMBER = 1_000_000


def _check_board(text: str) -> None:
    ranks = text.split("/")
    if len(ranks) != 9:
        raise PositionError(f"SFEN board '{text}' must have 9 ranks separated by '/', found {len(ranks)}")
    counts: dict[str, int] = {}
    kings = {"K": 0, "k": 0}
    king_squares: list[tuple[int, int]] = []
    pawn_files: set[tuple[str, int]] = set()
    for r, rank in enumerate(ranks):
        file_idx = 0  # counts from file 9 (left) towards file 1
        i = 0
        while i < len(rank):
            ch = rank[i]
            if ch.isdigit():
                if ch == "0":
                    raise PositionError(f"SFEN rank {r + 1} '{rank}': empty-square counts run from 1 to 9")
                file_idx += int(ch)
                i += 1
                continue
            promoted = ch == "+"
            if promoted:
                i += 1
                if i >= len(rank):
                    raise PositionError(f"SFEN rank {r + 1} '{rank}' ends with '+'")
                ch = rank[i]
            kind = ch.upper()
            if kind not in _PIECE_LIMITS:
                raise PositionError(f"SFEN rank {r + 1} '{rank}': unknown piece '{ch}'")
            if promoted and kind not in _PROMOTABLE:
                raise PositionError(f"SFEN rank {r + 1} '{rank}': '{ch}' cannot be promoted")
            black = ch.isupper()
            if not promoted:
                rows_left = r if black else 8 - r  # ranks still ahead of the piece
                if kind in "PL" and rows_left == 0:
                    raise PositionError(f"SFEN rank {r + 1}: unpromoted '{ch}' on the last rank cannot move")
                if kind == "N" and rows_left <= 1:
                    raise PositionError(f"SFEN rank {r + 1}: unpromoted '{ch}' on the last two ranks")
                if kind == "P":
                    key = (ch, file_idx)
                    if key in pawn_files:
                        raise PositionError(f"SFEN: two unpromoted '{ch}' pawns on file {9 - file_idx} (nifu)")
                    pawn_files.add(key)
            if kind == "K":
                kings[ch] += 1
                king_squares.append((r, file_idx))
            counts[kind] = counts.get(kind, 0) + 1
            file_idx += 1
            i += 1
        if file_idx != 9:
            raise PositionError(f"SFEN rank {r + 1} '{rank}' covers {file_idx} files, not 9")
    if kings["K"] != 1 or kings["k"] != 1:
        raise PositionError(f"SFEN board must have one king per side (black {kings['K']}, white {kings['k']})")
    (r1, f1), (r2, f2) = king_squares
    if abs(r1 - r2) <= 1 and abs(f1 - f2) <= 1:  # cshogi's check test leaves out the king's own attacks
        raise PositionError("SFEN: the two kings stand next to each other (one could capture the other)")
    _check_counts(counts, "board")


def _parse_hands(text: str) -> dict[str, int]:
    if text == "-":
        return {}
    pos = 0
    counts: dict[str, int] = {}
    for m in _HAND_RE.finditer(text):
        if m.start() != pos:
            break
        n = int(m.group(1)) if m.group(1) else 1
        if n < 1:
            raise PositionError(f"SFEN hands '{text}': count must be at least 1")
        if m.group(2) in counts:  # cshogi does not add up repeats ('PP' gives one pawn): refuse them
            raise PositionError(f"SFEN hands '{text}': '{m.group(2)}' is listed twice")
        counts[m.group(2)] = counts.get(m.group(2), 0) + n
        pos = m.end()
    if pos != len(text):
        raise PositionError(f"SFEN hands '{text}' are malformed (expected e.g. '-' or '2Pb')")
    return counts


def _check_counts(counts: dict[str, int], where: str) -> None:
    for kind, n in counts.items():
        if n > _PIECE_LIMITS[kind]:
            raise PositionError(f"SFEN {where}: {n} pieces of kind '{kind}', at most {_PIECE_LIMITS[kind]} exist")


def validate_sfen(sfen: str) -> str:
    """Check an SFEN string thoroughly; return it normalised (move number added if missing)."""
    if not sfen.isascii():
        raise PositionError(f"SFEN '{sfen}' contains non-ASCII characters")
    parts = sfen.split()
    if len(parts) not in (3, 4):
        raise PositionError(f"SFEN '{sfen}' must have 3 or 4 fields: board, side, hands[, move number]")
    board, side, hands = parts[:3]
    _check_board(board)
    if side not in ("b", "w"):
        raise PositionError(f"SFEN side to move must be 'b' or 'w', got '{side}'")
    hand_counts = _parse_hands(hands)
    board_counts: dict[str, int] = {}
    for ch in board.replace("+", ""):
        if ch.isalpha():
            board_counts[ch.upper()] = board_counts.get(ch.upper(), 0) + 1
    for ch, n in hand_counts.items():
        board_counts[ch.upper()] = board_counts.get(ch.upper(), 0) + n
    _check_counts(board_counts, "position")
    number = parts[3] if len(parts) == 4 else "1"
    if not (number.isascii() and number.isdigit()) or not 1 <= int(number) <= MAX_MOVE_NUMBER:
        raise PositionError(f"SFEN move number must be an integer from 1 to {MAX_MOVE_NUMBER}, got '{number}'")
    normalised = f"{board} {side} {hands} {number}"
    # The side that just moved must not be in check: set the position with the turn flipped and ask.
    flipped = cshogi.Board()
    flipped.set_sfen(f"{board} {'w' if side == 'b' else 'b'} {hands} {number}")
    if flipped.is_check():
        raise PositionError(f"SFEN '{sfen}': the side not to move is in check (its king could be captured)")
    return normalised


def board_from_sfen(sfen: str) -> cshogi.Board:
    """A cshogi Board for a validated SFEN string."""
    board = cshogi.Board()
    board.set_sfen(validate_sfen(sfen))
    return board


def push_usi_move(board: cshogi.Board, usi: str) -> int:
    """Play a USI move string after checking that it is legal here; returns cshogi's move int.

    Legality is membership in cshogi's legal move list: `Board.is_legal` alone accepts a '+' on a
    move that cannot promote (a king or gold, or outside the zone), pawn/lance drops on the last rank
    and knight moves to the last two ranks without promotion, and pushing those corrupts the board.
    """
    if not re.fullmatch(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]", usi):
        raise PositionError(f"move '{usi}' is not a USI move (e.g. 7g7f, 8h2b+, P*5e)")
    move = board.move_from_usi(usi)
    if move == 0 or move not in board.legal_moves:
        raise PositionError(f"move '{usi}' is illegal in position '{board.sfen()}'")
    board.push(move)
    return move


def parse_position(text: str) -> cshogi.Board:
    """Parse what follows USI's `position`: `startpos [moves ...]`, `sfen S [moves ...]` or a bare SFEN.

    Every move is checked for legality; the error names the first bad move and its index.
    """
    tokens = text.split()
    if not tokens:
        raise PositionError("empty position")
    if tokens[0] == "startpos":
        board = cshogi.Board()
        rest = tokens[1:]
    else:
        if tokens[0] == "sfen":
            tokens = tokens[1:]
        end = tokens.index("moves") if "moves" in tokens else len(tokens)
        board = board_from_sfen(" ".join(tokens[:end]))
        rest = tokens[end:]
    if rest:
        if rest[0] != "moves":
            raise PositionError(f"expected 'moves' after the position, got '{rest[0]}'")
        for i, usi in enumerate(rest[1:]):
            try:
                push_usi_move(board, usi)
            except PositionError as exc:
                raise PositionError(f"move {i + 1} of the position: {exc}") from None
    return board


def position_string(board: cshogi.Board, start_sfen: str | None = None) -> str:
    """`startpos moves ...` (or `sfen S moves ...`) for a board reached from `start_sfen`."""
    moves = [cshogi.move_to_usi(m) for m in board.history]
    head = "startpos" if start_sfen in (None, STARTPOS_SFEN) else f"sfen {start_sfen}"
    return head + (" moves " + " ".join(moves) if moves else "")


def start_board(board: cshogi.Board) -> cshogi.Board:
    """A new board at the position `board`'s history starts from (the board itself is left as it was).

    The one walk back to a game's first position: engines are sent it with the moves since, records
    are stored from it, and opening suites compare lines by the positions along them."""
    first = board.copy()
    for _ in range(len(board.history)):
        first.pop()
    return first


def start_position(board: cshogi.Board) -> str:
    """SFEN of the position `board`'s history starts from (the board itself is left as it was)."""
    return start_board(board).sfen()
