"""Games as the page replays them: one SFEN per ply, the moves in KIF notation, a value per ply.

The browser draws boards from SFEN strings, so all shogi rules stay in cshogi on the server. Two
sources: self-play games (hcpe3, whose per-ply `eval` is the search's score for the side to move)
and gating games (CSA records in `games/`, which carry no evaluations; the page asks `evaluate`
for the network's value of each position). Values are sent as Black's win probability in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import cshogi.CSA
import cshogi.KIF

from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_NYUGYOKU,
    FLAG_REPETITION,
    WHITE_WIN,
    Hcpe3Record,
)
from dlzero.errors import DataError
from dlzero.search.result import cp_to_winrate

CSA_ENDINGS = {
    "%TORYO": "resignation", "%SENNICHITE": "repetition", "%KACHI": "declaration", "%JISHOGI": "move limit",
    "%+ILLEGAL_ACTION": "illegal action by Black", "%-ILLEGAL_ACTION": "illegal action by White",
    "%ILLEGAL_MOVE": "illegal move", "%TIME_UP": "time up", "%CHUDAN": "interrupted", "%MAX_MOVES": "move limit",
}


@dataclass
class Replay:
    """A game ready for the page: `sfens[i]` is the position after `i` plies (len(moves) + 1 of them)."""

    title: str
    black: str
    white: str
    result: str
    sfens: list[str]
    moves: list[str]  # KIF notation with the mover's mark, e.g. "▲７六歩(77)"
    usi: list[str]
    values: list[float | None] = field(default_factory=list)  # Black's win probability before each ply
    value_source: str = ""

    def to_dict(self) -> dict:
        return dict(vars(self))


def _play(board: cshogi.Board, moves: list[int]) -> tuple[list[str], list[str], list[str]]:
    """Push `moves` on `board`: SFENs (start included), KIF labels, USI strings; DataError on an illegal move."""
    sfens, labels, usi = [board.sfen()], [], []
    prev = None
    for ply, move in enumerate(moves, start=1):
        if not board.is_legal(move):
            raise DataError("game record", None, f"ply {ply}: move {cshogi.move_to_usi(move)} is illegal")
        mark = "▲" if board.turn == cshogi.BLACK else "△"
        labels.append(mark + cshogi.KIF.move_to_kif(move, prev))
        usi.append(cshogi.move_to_usi(move))
        board.push(move)
        sfens.append(board.sfen())
        prev = move
    return sfens, labels, usi


def hcpe3_result(game: Hcpe3Record) -> str:
    """A person's words for an hcpe3 result byte."""
    winner = game.winner
    text = "Black (sente) wins" if winner == BLACK_WIN else "White (gote) wins" if winner == WHITE_WIN else "draw"
    how = [name for flag, name in ((FLAG_REPETITION, "repetition"), (FLAG_NYUGYOKU, "declaration"),
                                   (FLAG_MAX_MOVES, "move limit")) if game.result & flag]
    return text + (f" ({', '.join(how)})" if how else "")


def selfplay_replay(game: Hcpe3Record, title: str) -> Replay:
    """A self-play game from an hcpe3 shard, with the search's value of each ply."""
    board = game.start_board()
    turns = []
    moves = []
    for rec in game.moves:
        turns.append(board.turn)
        move = board.move_from_move16(rec.move16)
        if not board.is_legal(move):
            raise DataError(title, None, f"ply {len(moves) + 1}: move16 {rec.move16} is illegal")
        moves.append(move)
        board.push(move)
    sfens, labels, usi = _play(game.start_board(), moves)
    values: list[float | None] = []
    for rec, turn in zip(game.moves, turns, strict=True):
        p = cp_to_winrate(rec.eval)
        values.append(round(p if turn == cshogi.BLACK else 1.0 - p, 4))
    return Replay(title=title, black="self-play", white="self-play", result=hcpe3_result(game), sfens=sfens,
                  moves=labels, usi=usi, values=values, value_source="search value (hcpe3 eval) before each move")


def csa_replay(path: Path, title: str) -> Replay:
    """A gating game from a CSA record; DataError when cshogi cannot read it or a move is illegal."""
    try:
        parsed = cshogi.CSA.Parser.parse_file(str(path))
    except Exception as exc:  # cshogi's parser raises plain exceptions of several kinds on bad text
        raise DataError(str(path), None, f"not a readable CSA record ({exc})") from None
    if not parsed:
        raise DataError(str(path), None, "no game in the CSA record")
    rec = parsed[0]
    board = cshogi.Board(rec.sfen)
    sfens, labels, usi = _play(board, list(rec.moves))
    names = list(rec.names) + ["", ""]
    ending = CSA_ENDINGS.get(rec.endgame, rec.endgame or "unfinished")
    winner = {cshogi.BLACK_WIN: "Black (sente) wins", cshogi.WHITE_WIN: "White (gote) wins"}.get(rec.win, "draw")
    result = f"{winner} ({ending})" if rec.endgame else "unfinished"
    return Replay(title=title, black=names[0] or "Black", white=names[1] or "White", result=result,
                  sfens=sfens, moves=labels, usi=usi, values=[None] * len(labels), value_source="")
