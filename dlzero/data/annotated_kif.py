"""Annotated KIF: a game record written back with the engine's view of every position as comments.

The comment lines are the ones ShogiHome writes after an analysis and reads back for its
evaluation graph and PV display (sunfish-shogi/shogihome, src/common/record/comment.ts:
`buildSearchComment` writes them, `parseComment` / `getPVsFromSearchComment` read them). In KIF a
comment is a line starting with `*` below the move it belongs to (above move 1: the start
position); the `#` after it marks an analysis ("research") comment, as opposed to the player's own
thinking (`*評価値=`):

    *【悪手】                 ShogiHome's header for a blunder (only on moves that lost too much)
    *#詰み=先手勝ち:7手        a proven mate: who wins, in how many plies
    *#評価値=-123             centipawns from Black's (先手) point of view, as ShogiHome stores it
    *#読み筋=△３四歩▲２六歩   the engine's PV from the position after the move, KI2 notation
    *#ノード数=401
    *#エンジン=dlzero
    *#最善手=▲２六歩          ours: what the engine preferred instead of this move (ShogiHome ignores it)

`.kifu` files are UTF-8; `.kif` files are Shift_JIS (cp932), as KIF readers expect by default;
both declare their encoding in a `#KIF` header line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import cshogi
import cshogi.KI2
import cshogi.KIF

from dlzero.data.atomic import atomic_write_bytes
from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, WHITE_WIN
from dlzero.data.records import KifuRecord

ENGINE_NAME = "dlzero"
# Terminal words of CSA and KIF records -> the KIF terminal line.
_KIF_ENDINGS = {
    "%TORYO": "投了", "投了": "投了", "%TSUMI": "詰み", "詰み": "詰み", "%KACHI": "入玉勝ち", "入玉勝ち": "入玉勝ち",
    "%SENNICHITE": "千日手", "千日手": "千日手", "%JISHOGI": "持将棋", "持将棋": "持将棋",
    "%TIME_UP": "切れ負け", "切れ負け": "切れ負け", "%ILLEGAL_MOVE": "反則負け", "反則負け": "反則負け",
    "反則勝ち": "反則勝ち", "%CHUDAN": "中断", "中断": "中断",
}  # fmt: skip
_SIDE = {cshogi.BLACK: "先手", cshogi.WHITE: "後手"}


@dataclass
class PositionNote:
    """The engine's view of one position, as the comment needs it (values for the side to move)."""

    score_cp: int
    mate: int | None        # plies to mate, > 0: the side to move mates
    pv: list[str]           # USI moves from this position
    nodes: int
    blunder: bool = False   # the move that led here lost more than the threshold
    better: str | None = None  # USI move the engine preferred to the one that led here


def pv_text(board: cshogi.Board, usi_moves: Sequence[str]) -> str:
    """`▲７六歩△３四歩` for USI moves from `board` (a copy is played on, so 同 refers to the record)."""
    b = board.copy()
    out = []
    for usi in usi_moves:
        move = b.move_from_usi(usi)
        if move == 0 or not b.is_legal(move):
            break
        out.append(cshogi.KI2.move_to_ki2(move, b))
        b.push(move)
    return "".join(out)


def comment_lines(board: cshogi.Board, note: PositionNote) -> list[str]:
    """The `*`-prefixed comment lines for the position on `board` (after the move they annotate)."""
    black = board.turn == cshogi.BLACK
    lines = ["*【悪手】"] if note.blunder else []
    if note.mate is not None:
        winner = board.turn if note.mate > 0 else 1 - board.turn
        lines.append(f"*#詰み={_SIDE[winner]}勝ち:{abs(note.mate)}手")
    lines.append(f"*#評価値={note.score_cp if black else -note.score_cp}")
    if note.pv:
        lines.append(f"*#読み筋={pv_text(board, note.pv)}")
    lines += [f"*#ノード数={note.nodes}", f"*#エンジン={ENGINE_NAME}"]
    if note.better is not None and board.history:
        before = board.copy()
        before.pop()
        lines.append(f"*#最善手={pv_text(before, [note.better])}")
    return lines


def _start_lines(sfen: str) -> list[str]:
    """手合割 for the standard and handicap starts, else a board diagram."""
    for name, preset in cshogi.KIF.Parser.HANDYCAP_SFENS.items():
        if preset is not None and preset.split()[:3] == sfen.split()[:3]:
            return [f"手合割：{name}"]
    return cshogi.KIF.board_to_bod(cshogi.Board(sfen)).splitlines()


def _result_line(game: KifuRecord, plies: int) -> str:
    if game.cut or game.winner is None:
        return f"まで{plies}手で中断"
    if game.winner == RESULT_DRAW:
        return f"まで{plies}手で{'千日手' if 'SENNICHITE' in game.ending or game.ending == '千日手' else '持将棋'}"
    winner = cshogi.BLACK if game.winner == BLACK_WIN else cshogi.WHITE
    assert game.winner in (BLACK_WIN, WHITE_WIN)
    return f"まで{plies}手で{_SIDE[winner]}の勝ち"


def format_annotated_kif(game: KifuRecord, notes: Sequence[PositionNote], header: Sequence[str] = (),
                         encoding: str = "UTF-8") -> str:
    """KIF text of `game` with `notes[k]` below move k (`notes[0]`: the start position)."""
    if len(notes) != len(game.moves) + 1:
        raise ValueError(f"need {len(game.moves) + 1} position notes (start + one per move), got {len(notes)}")
    lines = [f"#KIF version=2.0 encoding={encoding}", *(f"# {h}" for h in header), *_start_lines(game.sfen),
             "手数----指手---------消費時間--"]
    board = cshogi.Board(game.sfen)
    lines += comment_lines(board, notes[0])
    prev = None
    for number, move in enumerate(game.moves, start=1):
        text = cshogi.KIF.move_to_kif(move, prev)
        lines.append(f"{number:>4} {text:<12}( 0:00/00:00:00)")
        board.push(move)
        lines += comment_lines(board, notes[number])
        prev = move
    ending = "中断" if game.cut else _KIF_ENDINGS.get(game.ending)
    if ending is not None:
        lines.append(f"{len(game.moves) + 1:>4} {ending:<12}( 0:00/00:00:00)")
    lines.append(_result_line(game, len(game.moves)))
    return "\n".join(lines) + "\n"


def write_annotated_kif(path: str | os.PathLike[str], game: KifuRecord, notes: Sequence[PositionNote],
                        header: Sequence[str] = ()) -> None:
    """Write atomically: UTF-8 for `.kifu`, Shift_JIS (cp932) for `.kif`."""
    suffix = os.fspath(path).lower().rsplit(".", 1)[-1]
    if suffix not in ("kif", "kifu"):
        raise ValueError(f"{path}: annotated records are KIF files (.kif or .kifu)")
    utf8 = suffix == "kifu"
    text = format_annotated_kif(game, notes, header, "UTF-8" if utf8 else "Shift_JIS")
    atomic_write_bytes(path, text.encode("utf-8" if utf8 else "cp932"))
