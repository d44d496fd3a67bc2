"""The opening book in play and in the making.

`OwnBook` is the book a USI session plays from (USI_OwnBook, BookFile, BookMoves, BookPick: the
`book` config section). It reads the file when `isready` or `go` first needs it and again only when
BookFile names another file or the file changed, so a GUI that sets the options and sends `isready`
pays for the reading before the clock runs. A book that cannot be read is one `info string error`
line, once per file, and the engine searches every position as if it had no book: a bad file must
not cost a game.

`make_think_book` is `dlzero book make --think`: it walks the lines the network's own search
reaches from the start position, breadth first, and writes each searched position's best move and
the alternatives that got a share of the visits (YaneuraOu's think-based book maker, with a PUCT
search for its alpha-beta). Positions already in the output book are not searched again, and the
book is written every `save_every` searches and when the run ends or is stopped, so a run picks up
where the last one stopped.
"""

from __future__ import annotations

import os
import random
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import cshogi
from tqdm import tqdm

from dlzero.config import BookConfig
from dlzero.data.book import Book, BookError, BookMove, pick, position_key, read_book, write_book
from dlzero.engine.player import Player
from dlzero.engine.timeman import Limits
from dlzero.search import winrate_to_cp


class OwnBook:
    """The book of one USI session, loaded on demand; `play` answers a `go` from it."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._book: Book | None = None
        self._stamp: tuple | None = None  # (file, mtime, size) of the file last read, good or bad

    def load(self, cfg: BookConfig, say: Callable[[str], None]) -> Book | None:
        """The book `cfg` names, read if it is new or changed since the last read (None: off, or unreadable;
        an unreadable one is said once in an `info string`, and then the engine plays on without it)."""
        if not cfg.enabled or not cfg.file:
            return None
        try:
            st = os.stat(cfg.file)
            stamp: tuple = (cfg.file, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (cfg.file, None, None)
        if stamp == self._stamp:
            return self._book
        self._stamp, self._book = stamp, None
        try:
            self._book = read_book(cfg.file)
        except BookError as exc:
            say(f"info string error: book {exc}; playing without a book")
            return None
        say(f"info string book {cfg.file}: {len(self._book)} positions")
        return self._book

    def play(self, board: cshogi.Board, limits: Limits, cfg: BookConfig, ponder: bool,
             send: Callable[[str], None]) -> bool:
        """Answer `go` from the book if it has `board`'s position and the ply is within BookMoves: an
        `info string` naming the book move, an `info ... pv` line with its value, and `bestmove` at once.
        False (nothing sent but a load error) when the search must answer instead: no book, a position
        not in it or too deep, or a `go` that asks for a search itself (`ponder`, `infinite`,
        `searchmoves`)."""
        if limits.ponder or limits.open_ended or limits.searchmoves or board.move_number > cfg.max_ply:
            return False
        book = self.load(cfg, send)
        moves = book.moves(board) if book is not None else []
        if not moves:
            return False
        chosen = pick(moves, cfg.pick, self._rng)
        total = sum(m.count for m in moves)
        send(f"info string book move {chosen.move} (count {chosen.count} of {total}, value {chosen.value}, "
             f"{len(moves)} book moves, BookPick {cfg.pick})")
        reply = _legal_reply(board, chosen)
        pv = chosen.move + (f" {reply}" if reply else "")
        send(f"info depth {chosen.depth or 1} seldepth {chosen.depth or 1} nodes 0 time 0 "
             f"score cp {chosen.value} pv {pv}")
        send(f"bestmove {chosen.move}" + (f" ponder {reply}" if ponder and reply else ""))
        return True


def _legal_reply(board: cshogi.Board, move: BookMove) -> str | None:
    """The book move's ponder move if it is legal after the move (a book file's ponder column is not
    checked on reading, and a GUI that ponders on an illegal move loses the game)."""
    if move.ponder is None:
        return None
    after = board.copy()
    after.push_usi(move.move)
    reply = after.move_from_usi(move.ponder)
    return move.ponder if reply and reply in after.legal_moves else None


# ---------------------------------------------------------------- a book from the network's search


@dataclass
class ThinkReport:
    """What `make_think_book` did: positions searched this run, and positions the book now holds."""

    searched: int = 0
    positions: int = 0


def searched_moves(player: Player, board: cshogi.Board, playouts: int, share: float) -> list[BookMove]:
    """Book moves of `board` from a `playouts`-playout search: the best move and every move that got at least
    `share` of the visits; value the move's win rate as dlshogi's centipawns, count its visits, depth 0 (a
    tree search has no nominal depth). [] when the search answers `resign` or `win` (no move to book)."""
    player.new_game()  # each position searched alone: the book does not depend on the order of the walk
    player.set_position(board)
    analysis = player.think(Limits(playouts=playouts))
    if analysis.bestmove in ("resign", "win"):
        return []
    total = sum(m.visits for m in analysis.moves)
    out = []
    for stat in analysis.moves:
        if stat.usi == analysis.bestmove or (total and stat.visits >= share * total and stat.visits > 0):
            winrate = stat.proven if stat.proven is not None else stat.winrate
            out.append(BookMove(stat.usi, None, winrate_to_cp(winrate), 0, max(stat.visits, 1)))
    if not any(m.move == analysis.bestmove for m in out):  # settled before the search (a mate at the root)
        out.append(BookMove(analysis.bestmove, None, analysis.score_cp, 0, 1))
    return out


def existing_book(out: str) -> Book:
    """The book a `--think` run extends: the one at `out`, or an empty one. A malformed file raises
    BookError, read before the network loads, so it is refused at once and never overwritten."""
    return read_book(out) if os.path.exists(out) else Book()


def make_think_book(player: Player, book: Book, out: str, cfg: BookConfig, progress: bool = True) -> ThinkReport:
    """Extend `book` (`existing_book(out)`) by the search of `player` up to `cfg.max_ply`, searching at most
    `cfg.positions` positions not in it, and write it to `out`; see the module docstring."""
    report = ThinkReport()
    frontier: deque[cshogi.Board] = deque([cshogi.Board()])
    seen: set[str] = set()
    bar = tqdm(total=cfg.positions, file=sys.stderr, disable=not progress, unit="pos", desc="book")
    try:
        while frontier and report.searched < cfg.positions:
            board = frontier.popleft()
            key = position_key(board.sfen())
            if key in seen or board.move_number > cfg.max_ply or board.is_game_over():
                continue
            seen.add(key)
            if not book.moves(board):
                for move in searched_moves(player, board, cfg.playouts, cfg.share):
                    book.add(board, move)
                report.searched += 1
                bar.update(1)
                if report.searched % cfg.save_every == 0:
                    _save(book, out)
            for move in book.moves(board):
                child = board.copy()
                child.push_usi(move.move)
                frontier.append(child)
    finally:
        bar.close()
        _save(book, out)
    report.positions = len(book)
    return report


def _save(book: Book, out: str) -> None:
    """Write the book with ponder moves filled from the positions searched so far."""
    book.fill_ponder()
    write_book(out, book)
