"""Opening books in YaneuraOu's text format ("YANEURAOU-DB2016 1.00"), the `.db` files that
YaneuraOu and dlshogi both load, so a book made here plays in those engines and theirs play here.

The format: a first line `#YANEURAOU-DB2016 1.00`; then for each position a line
`sfen <board> <side> <hands> <ply>` and below it one line per book move,
`<move> <ponder move or none> <value> <depth> <count>`: USI moves, the value in centipawns for the
side to move, the depth of the search that gave it (0 when none did), and how often the move was
chosen (games that played it, or visits). Other lines starting with '#' are comments.

Positions are matched without their ply, as YaneuraOu matches them: the same position reached by a
different number of moves is the same book entry.

Reading is strict: a book is input a user can get wrong, and a book move is played without a search
to catch a mistake, so a bad header, an SFEN that is not a position, a malformed move line or a move
that is illegal in its position refuses the whole file with one `BookError` naming the line.
Writing is atomic (a temporary file renamed over the target), so a book being made is always either
the previous complete file or the new complete file.
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
from tqdm import tqdm

from dlzero.data.atomic import atomic_open
from dlzero.data.isolated import DEFAULT_TIMEOUT_S, run_isolated
from dlzero.errors import DlzeroError, PositionError
from dlzero.position import validate_sfen

HEADER = "#YANEURAOU-DB2016 1.00"
_USI_MOVE = re.compile(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]")
_INT = re.compile(r"[+-]?[0-9]+")


class BookError(DlzeroError):
    """A book file is missing, unreadable or malformed; the message names the file and the line."""


def position_key(sfen: str) -> str:
    """The book's key for a position: its SFEN without the ply (board, side to move, hands)."""
    return " ".join(sfen.split()[:3])


@dataclass
class BookMove:
    """One move of a book position; `value` is in centipawns for the side to move."""

    move: str
    ponder: str | None = None
    value: int = 0
    depth: int = 0
    count: int = 1


def _rank(move: BookMove) -> tuple[int, int, str]:
    """Best first: the most chosen move, then the higher value (then by name, so the order is fixed)."""
    return -move.count, -move.value, move.move


@dataclass
class BookEntry:
    """A book position: the ply it was first reached at (written in its sfen line) and its moves."""

    ply: int
    moves: list[BookMove] = field(default_factory=list)

    def ranked(self) -> list[BookMove]:
        """The moves best first (`_rank`), the order the file is written in."""
        return sorted(self.moves, key=_rank)


class Book:
    """Book positions by `position_key`."""

    def __init__(self) -> None:
        self.entries: dict[str, BookEntry] = {}

    def __len__(self) -> int:
        """Positions with at least one move (the ones the file holds)."""
        return sum(1 for entry in self.entries.values() if entry.moves)

    def moves(self, board: cshogi.Board) -> list[BookMove]:
        """The book moves of `board`'s position, best first; [] when it is not in the book."""
        entry = self.entries.get(position_key(board.sfen()))
        return entry.ranked() if entry is not None else []

    def entry(self, board: cshogi.Board) -> BookEntry:
        """The entry of `board`'s position, made empty if the book lacks it."""
        sfen = board.sfen()
        return self.entries.setdefault(position_key(sfen), BookEntry(int(sfen.split()[3])))

    def add(self, board: cshogi.Board, move: BookMove) -> None:
        """Add `move` to `board`'s position, or add its count to the same move already there."""
        entry = self.entry(board)
        for known in entry.moves:
            if known.move == move.move:
                known.count += move.count
                return
        entry.moves.append(move)

    def fill_ponder(self) -> None:
        """Give each move without a ponder move the book's best reply, where the book has the position
        the move leads to: a GUI that ponders then thinks on the line the book expects."""
        board = cshogi.Board()
        for key, entry in self.entries.items():
            for move in entry.moves:
                if move.ponder is not None:
                    continue
                board.set_sfen(f"{key} {entry.ply}")
                board.push_usi(move.move)
                replies = self.moves(board)
                move.ponder = replies[0].move if replies else None


def pick(moves: list[BookMove], how: str, rng: random.Random | None = None) -> BookMove:
    """The move to play among a position's book moves: `best` is the first of `BookEntry.ranked`'s order;
    `weighted` draws one with probability proportional to its count (a move with count 0 never; when every
    count is 0, the best)."""
    ranked = sorted(moves, key=_rank)
    if how == "best" or sum(m.count for m in ranked) <= 0:
        return ranked[0]
    return (rng or random).choices(ranked, weights=[max(m.count, 0) for m in ranked])[0]


# ---------------------------------------------------------------- reading and writing


def read_book(path: str | os.PathLike[str]) -> Book:
    """The book in `path`; BookError (one line: file, line number, what is wrong) for anything else."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise BookError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BookError(f"{path}: is a directory, not a book file") from None
    except UnicodeDecodeError as exc:
        raise BookError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise BookError(f"{path}: cannot read: {exc.strerror or exc}") from None
    lines = text.splitlines()
    if not lines or not lines[0].lstrip("\ufeff").startswith("#YANEURAOU-DB2016"):
        raise BookError(f"{path}: not a YaneuraOu book (the first line must be '{HEADER}')")
    book = Book()
    board = cshogi.Board()
    entry: BookEntry | None = None
    for number, raw in enumerate(lines[1:], start=2):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if line.startswith("sfen "):
                board, entry = _read_sfen_line(book, line[5:])
            elif entry is None:
                raise BookError("a move line before any 'sfen' line")
            else:
                entry.moves.append(_read_move_line(board, line))
        except (BookError, PositionError) as exc:
            raise BookError(f"{path}:{number}: {exc}") from None
    return book


def _read_sfen_line(book: Book, sfen: str) -> tuple[cshogi.Board, BookEntry]:
    """The board and entry a `sfen ...` line starts (a position already in the book gets more moves)."""
    board = cshogi.Board()
    board.set_sfen(validate_sfen(sfen))
    return board, book.entry(board)


def _read_move_line(board: cshogi.Board, line: str) -> BookMove:
    """A move line of `board`'s position, checked: five fields, legal moves, integer numbers."""
    fields = line.split()
    if len(fields) != 5:
        raise BookError(f"a move line needs 5 fields (move ponder value depth count), got '{line}'")
    move, ponder, *numbers = fields
    if not _USI_MOVE.fullmatch(move) or board.move_from_usi(move) not in board.legal_moves:
        what = "not a USI move" if not _USI_MOVE.fullmatch(move) else "illegal in this position"
        raise BookError(f"move '{move}' is {what}")
    if ponder != "none" and not _USI_MOVE.fullmatch(ponder):
        raise BookError(f"ponder move '{ponder}' is not a USI move or 'none'")
    bad = [n for n in numbers if not _INT.fullmatch(n)]
    if bad:
        raise BookError(f"value, depth and count must be integers, got '{bad[0]}'")
    value, depth, count = map(int, numbers)
    return BookMove(move, None if ponder == "none" else ponder, value, depth, count)


def book_text(book: Book) -> Iterable[str]:
    """The lines of the book file, positions sorted by their SFEN (as YaneuraOu writes them)."""
    yield HEADER
    for key in sorted(book.entries):
        entry = book.entries[key]
        if not entry.moves:
            continue
        yield f"sfen {key} {entry.ply}"
        for m in entry.ranked():
            yield f"{m.move} {m.ponder or 'none'} {m.value} {m.depth} {m.count}"


def write_book(path: str | os.PathLike[str], book: Book) -> None:
    """Write `book` to `path` atomically (a reader never sees half a book)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w") as f:
        for line in book_text(book):
            f.write(line + "\n")


# ---------------------------------------------------------------- a book from game records


@dataclass
class RecordsReport:
    """What `book_from_records` read: games counted, and (path, reason) for files and games skipped."""

    games: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def book_from_records(files: list[str], max_ply: int, min_count: int = 1, progress: bool = True,
                      timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[Book, RecordsReport]:
    """A book of the moves the games in `files` played at plies 1..`max_ply`, each counted once per game
    that played it; moves played fewer than `min_count` times are left out (and positions left with none).

    Records are read by `dlzero.data.records` in a child process, as `dlzero import-records` reads them
    (a file that crashes the parser is skipped with its reason), up to each game's first illegal move.
    Values and depths are 0: a record says what was played, not how good it was.
    """
    book, report = Book(), RecordsReport()
    with tqdm(total=len(files), file=sys.stderr, disable=not progress, unit="file", desc="book") as bar:
        for outcome in run_isolated("dlzero.data.records:games_of_file", files, timeout_s):
            bar.update(1)
            if outcome.error is not None:
                report.skipped.append((outcome.path, outcome.error))
                continue
            for index, game in enumerate(outcome.value):
                try:
                    validate_sfen(game.sfen)  # no book holds a position without both kings (tsume problems)
                except PositionError as exc:
                    report.skipped.append((f"{outcome.path} game {index + 1}", str(exc)))
                    continue
                report.games += 1
                board = cshogi.Board(game.sfen)
                for move in game.moves:
                    if board.move_number > max_ply:
                        break
                    book.add(board, BookMove(cshogi.move_to_usi(move)))
                    board.push(move)
    for key, entry in list(book.entries.items()):
        entry.moves = [m for m in entry.moves if m.count >= min_count]
        if not entry.moves:
            del book.entries[key]
    book.fill_ponder()
    return book, report
