"""Read CSA, KIF and KI2 game records (files people collect) into games: start, moves, result.

Both users of records read through here: `dlzero import-records` (record_import.py, hcpe for
supervised training) and `dlzero review` / teacher positions (`read_games`). Decisions:

- Result. 1 or 2 when the record says who won: a CSA `%TORYO`/`%TSUMI`/`%TIME_UP`/`%ILLEGAL_MOVE`
  loses for the side to move, `%KACHI` wins for it, `%+ILLEGAL_ACTION`/`%-ILLEGAL_ACTION` name the
  offender; in KIF the "まで…手で…の勝ち" line, or else the final 投了/詰み/切れ負け/反則負け
  (loss for the side to move) or 入玉勝ち/反則勝ち (win) line. 千日手, 持将棋, %SENNICHITE and
  %JISHOGI are draws (0). A game with no known winner (中断, %CHUDAN, no result at all) has winner None.
- KIF: the main line only (variations after the first "変化：" line are ignored), handicaps by
  手合割, board diagrams (custom start positions, which cshogi's own KIF parser ignores) read
  here; moves are read with cshogi's `KIF.Parser.parse_move_str`. CSA: cshogi's parser, every
  game of a multi-game ("/"-separated) file. KI2 (moves without their origin square): cshogi's
  KI2 parser, which resolves 右/左/上/引 against the board.
- Text encoding: the declared one (`'encoding=` in CSA, `#KIF ... encoding=` in KIF) if any,
  else UTF-8, then cp932, then EUC-JP.
- cshogi's parsers are C++ and can crash the process on bad input, so a user's file is only ever
  parsed in a child process (dlzero.data.isolated).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import cshogi
import cshogi.CSA
import cshogi.KI2
import cshogi.KIF

from dlzero.data.hcpe import format_move16, legal_move16s
from dlzero.data.hcpe3 import BLACK_WIN, RESULT_DRAW, WHITE_WIN
from dlzero.data.isolated import DEFAULT_TIMEOUT_S, run_isolated
from dlzero.errors import PositionError
from dlzero.position import board_from_sfen

RECORD_SUFFIXES = (".csa", ".kif", ".kifu", ".ki2")

# ---------------------------------------------------------------- results

_LOSS_FOR_MOVER = {"%TORYO", "%TSUMI", "%TIME_UP", "%ILLEGAL_MOVE", "投了", "詰み", "切れ負け", "反則負け"}
_WIN_FOR_MOVER = {"%KACHI", "入玉勝ち", "反則勝ち"}
_DRAWN = {"%SENNICHITE", "%JISHOGI", "%MAX_MOVES", "%HIKIWAKE", "千日手", "持将棋"}
_FIXED_WINNER = {"%+ILLEGAL_ACTION": WHITE_WIN, "%-ILLEGAL_ACTION": BLACK_WIN}


def _winner_from_ending(ending: str, mover: int) -> int | None:
    """Winner code for a terminal word, given the side to move when the game ended; None if unknown."""
    if ending in _FIXED_WINNER:
        return _FIXED_WINNER[ending]
    if ending in _DRAWN:
        return RESULT_DRAW
    mover_wins = BLACK_WIN if mover == cshogi.BLACK else WHITE_WIN
    if ending in _WIN_FOR_MOVER:
        return mover_wins
    if ending in _LOSS_FOR_MOVER:
        return BLACK_WIN + WHITE_WIN - mover_wins
    return None


@dataclass
class ParsedRecord:
    """A game as read from a record: start SFEN, cshogi moves, winner (None if unknown), notes."""

    sfen: str
    moves: list[int]
    winner: int | None
    ending: str
    notes: list[str] = field(default_factory=list)


def _start_turn(sfen: str) -> int:
    return cshogi.WHITE if sfen.split()[1] == "w" else cshogi.BLACK


# ---------------------------------------------------------------- text

_DECLARED_ENCODING_RE = re.compile(rb"encoding=([A-Za-z0-9_-]+)")
_CODEC_ALIASES = {"shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "windows-31j": "cp932"}


def decode_record(raw: bytes) -> str:
    """Record text: declared encoding first, else UTF-8, cp932, EUC-JP; newlines normalised to \\n."""
    declared = _DECLARED_ENCODING_RE.search(raw[:512])
    candidates = ["utf-8-sig", "cp932", "euc_jp"]
    if declared:
        name = declared.group(1).decode("ascii").lower()
        candidates.insert(0, _CODEC_ALIASES.get(name, name))
    for codec in candidates:
        try:
            text = raw.decode(codec)
        except (UnicodeDecodeError, LookupError):
            continue
        return text.replace("\r\n", "\n").replace("\r", "\n")
    raise ValueError("text is not UTF-8, cp932 (Shift_JIS) or EUC-JP")


# ---------------------------------------------------------------- CSA


def _parse_csa(text: str) -> list[ParsedRecord]:
    """Every game of a CSA file (games are separated by "/" lines)."""
    games = []
    for parser in cshogi.CSA.Parser.parse_str(text if text.endswith("\n") else text + "\n"):
        if not parser.sfen:  # the empty piece after a trailing "/"
            continue
        moves = list(parser.moves)
        mover = _start_turn(parser.sfen) ^ (len(moves) & 1)
        ending = parser.endgame or "no result"
        games.append(ParsedRecord(parser.sfen, moves, _winner_from_ending(ending, mover), ending))
    return games


# ---------------------------------------------------------------- KIF

_KIF_PIECES = {
    "歩": "P", "香": "L", "桂": "N", "銀": "S", "金": "G", "角": "B", "飛": "R", "玉": "K", "王": "K",
    "と": "+P", "杏": "+L", "圭": "+N", "全": "+S", "馬": "+B", "龍": "+R", "竜": "+R",
}  # fmt: skip
_HAND_ORDER = "RBGSNLP"
_KANJI_DIGITS = "一二三四五六七八九"
_MOVE_LINE_RE = re.compile(r"^([0-9]+)\s")  # ASCII digits: "９ ８ ７ …" above a diagram is no move
_TERMINAL_RE = re.compile(
    r"^([0-9]+)\s+(中断|投了|持将棋|千日手|詰み|切れ負け|反則勝ち|反則負け|入玉勝ち|封じ手)"
)
_SAME_SQUARE_RE = re.compile(r"同\s*")  # "同歩", "同 歩" and "同　歩" all mean "on the last square"
_RESULT_WIN_RE = re.compile(r"^まで、?[0-9]+手で.*?(先手|下手|後手|上手)の(勝ち|入玉勝ち|反則勝ち|反則負け)")
_RESULT_DRAW_RE = re.compile(r"^まで、?[0-9]+手で(千日手|持将棋)")
_TURN_LINES = {"先手番": "b", "下手番": "b", "後手番": "w", "上手番": "w"}


@dataclass
class _KifText:
    """The parts of a KIF main line: header fields, diagram rows, turn line, moves, result line."""

    header: dict[str, str] = field(default_factory=dict)
    rows: list[str] = field(default_factory=list)
    turn: str | None = None
    move_lines: list[str] = field(default_factory=list)
    result_line: str | None = None


def _scan_kif(text: str) -> _KifText:
    """Sort the lines of the main line (everything before the first "変化" block) by kind."""
    kif = _KifText()
    for raw_line in text.split("\n"):
        line = raw_line.strip()
        if line.startswith("変化"):
            break
        if not line or line[0] in "#*&":
            continue
        if line.startswith("|"):
            kif.rows.append(line)
        elif line in _TURN_LINES:
            kif.turn = _TURN_LINES[line]
        elif line.startswith("まで"):
            kif.result_line = line
        elif _MOVE_LINE_RE.match(line):
            kif.move_lines.append(line)
        elif "：" in line:
            key, value = line.split("：", 1)
            kif.header[key.strip()] = value.strip()
    return kif


def _kanji_number(text: str) -> int:
    """一 … 十八 as an int; an empty string means one piece."""
    if not text:
        return 1
    tens, ten, ones = text.partition("十")
    if not ten:
        return _KANJI_DIGITS.index(text) + 1
    tens_value = _KANJI_DIGITS.index(tens) + 1 if tens else 1
    return tens_value * 10 + (_KANJI_DIGITS.index(ones) + 1 if ones else 0)


def _kif_hand(text: str, lower: bool) -> str:
    """SFEN hand part for "飛二　角　歩十七"-style text ("なし" or empty: nothing)."""
    counts = {}
    for item in text.split():
        if item == "なし":
            continue
        letter = _KIF_PIECES.get(item[0])
        if letter is None or len(letter) != 1 or letter == "K":
            raise ValueError(f"cannot read piece in hand {item!r}")
        counts[letter] = _kanji_number(item[1:])
    out = "".join(f"{counts[p] if counts[p] > 1 else ''}{p}" for p in _HAND_ORDER if p in counts)
    return out.lower() if lower else out


def _diagram_rank(row: str) -> str:
    """One SFEN rank from a diagram row like "| ・v歩 ・ …|一" (two characters a square)."""
    cells = row[1:].split("|")[0]
    if len(cells) != 18:
        raise ValueError(f"cannot read board diagram row {row!r}")
    out, empty = "", 0
    for side, piece in zip(cells[::2], cells[1::2], strict=True):
        if piece == "・":
            empty += 1
            continue
        letter = _KIF_PIECES.get(piece)
        if letter is None or side not in " vV":
            raise ValueError(f"cannot read board diagram row {row!r}")
        out += (str(empty) if empty else "") + (letter.lower() if side in "vV" else letter)
        empty = 0
    return out + (str(empty) if empty else "")


def _kif_start_sfen(kif: _KifText) -> str:
    """Start position: the board diagram if there is one, else the 手合割 handicap (平手 default)."""
    handicap = kif.header.get("手合割", "平手")
    preset = cshogi.KIF.Parser.HANDYCAP_SFENS.get(handicap)
    if not kif.rows:
        if preset is None:
            raise ValueError(f"handicap {handicap!r} needs a board diagram, and the file has none")
        return preset
    if len(kif.rows) != 9:
        raise ValueError(f"board diagram has {len(kif.rows)} rows, not 9")
    board = "/".join(_diagram_rank(row) for row in kif.rows)
    black = _kif_hand(kif.header.get("先手の持駒", kif.header.get("下手の持駒", "")), lower=False)
    white = _kif_hand(kif.header.get("後手の持駒", kif.header.get("上手の持駒", "")), lower=True)
    turn = kif.turn or (preset.split()[1] if preset else "b")
    return f"{board} {turn} {black + white or '-'} 1"


def _kif_winner(result_line: str | None) -> int | None:
    """Winner from a "まで…" line, None when it names none (中断, tsume "まで7手詰", absent)."""
    if result_line is None:
        return None
    if _RESULT_DRAW_RE.match(result_line):
        return RESULT_DRAW
    m = _RESULT_WIN_RE.match(result_line)
    if m is None:
        return None
    side_wins = BLACK_WIN if m.group(1) in ("先手", "下手") else WHITE_WIN
    return BLACK_WIN + WHITE_WIN - side_wins if m.group(2) == "反則負け" else side_wins


def _parse_kif(text: str) -> list[ParsedRecord]:
    """The main line of a KIF file as one game; reading stops at the first illegal/unreadable move."""
    kif = _scan_kif(text)
    sfen = _kif_start_sfen(kif)
    board = cshogi.Board(sfen)
    moves: list[int] = []
    notes: list[str] = []
    ending, plies, stopped = "no result", None, False
    for line in kif.move_lines:
        terminal = _TERMINAL_RE.match(line)
        if terminal:
            ending, plies = terminal.group(2), int(terminal.group(1)) - 1
            break
        if stopped:
            continue
        number = int(_MOVE_LINE_RE.match(line).group(1))
        move = None
        if number == len(moves) + 1:
            move, _, _ = cshogi.KIF.Parser.parse_move_str(_SAME_SQUARE_RE.sub("同　", line), board)
        if move is None:
            notes.append(f"cannot read move {number} ({line!r}); imported the moves before it")
            stopped = True
            continue
        moves.append(move)
        if (move & 0xFFFF) not in legal_move16s(board):
            stopped = True  # the replay reports it
            continue
        board.push(move)
    mover = _start_turn(sfen) ^ ((len(moves) if plies is None else plies) & 1)
    winner = _kif_winner(kif.result_line)
    if winner is None:
        winner = _winner_from_ending(ending, mover)
    return [ParsedRecord(sfen, moves, winner, ending, notes)]


# ---------------------------------------------------------------- KI2

_CSHOGI_WINNER = {cshogi.BLACK_WIN: BLACK_WIN, cshogi.WHITE_WIN: WHITE_WIN, cshogi.DRAW: RESULT_DRAW}


def _parse_ki2(text: str) -> list[ParsedRecord]:
    """A KI2 file as one game; cshogi's parser names the winner from the "まで…" line."""
    parser = cshogi.KI2.Parser.parse_str(text)
    ending = parser.endgame or "no result"
    return [ParsedRecord(parser.sfen, list(parser.moves), _CSHOGI_WINNER.get(parser.win), ending)]


def parse_record_file(path: str) -> list[ParsedRecord]:
    """Every game of one record file, by its suffix. Only call it in a child process (see above)."""
    parsers = {".csa": _parse_csa, ".kif": _parse_kif, ".kifu": _parse_kif, ".ki2": _parse_ki2}
    suffix = Path(path).suffix.lower()
    if suffix not in parsers:
        raise ValueError(f"unknown record format {suffix!r} (expected {', '.join(RECORD_SUFFIXES)})")
    return parsers[suffix](decode_record(Path(path).read_bytes()))


# ---------------------------------------------------------------- games for review and teacher positions


@dataclass
class KifuRecord:
    """One game of a kifu (a KIF, KI2 or CSA record file) as `dlzero review` needs it: start, legal
    moves, how it ended.

    `moves` are cshogi moves of the legal prefix (a record cut at an illegal move keeps the moves
    before it, and `notes` says so); `ending` is the record's own terminal word ("%TORYO", "投了",
    "%KACHI", ...; "no result" if none); `winner` is BLACK_WIN, WHITE_WIN, RESULT_DRAW or None.
    """

    sfen: str
    moves: list[int]
    ending: str
    winner: int | None
    notes: list[str] = field(default_factory=list)
    cut: bool = False  # the record goes on past `moves` with a move that is unreadable or illegal


def legal_prefix(game: ParsedRecord) -> tuple[list[int], str | None]:
    """The moves of a parsed game up to its first illegal or unreadable one, as cshogi moves
    normalised through cshogi's move16 lookup, and what stopped there ("move 7 (7g7f) is illegal",
    "move 3 was not understood by the parser"; None when every move is legal).

    The one legality check of a record: import-records and review cut a game at the same move. A start
    position the engine would refuse (`dlzero.position.validate_sfen`: adjacent kings, a pawn that cannot
    move, ...) keeps no move at all, so no impossible position reaches the training data."""
    try:
        board = board_from_sfen(game.sfen)
    except PositionError as exc:
        return [], f"the start position is refused: {exc}"
    moves: list[int] = []
    for move in game.moves:
        move16 = move & 0xFFFF
        if move16 not in legal_move16s(board):
            what = f"({format_move16(move16)}) is illegal" if move16 else "was not understood by the parser"
            return moves, f"move {len(moves) + 1} {what}"
        full = board.move_from_move16(move16)
        moves.append(full)
        board.push(full)
    return moves, None


def _game_record(game: ParsedRecord) -> KifuRecord:
    """The legal prefix of a parsed game."""
    notes = list(game.notes)
    cut = bool(notes)  # the KIF reader only leaves notes when it stopped at an unreadable move
    moves, stop = legal_prefix(game)
    if stop is not None:
        notes.append(f"{stop}; kept the {len(moves)} moves before it")
        cut = True
    return KifuRecord(game.sfen, moves, game.ending, game.winner, notes, cut)


def games_of_file(path: str) -> list[KifuRecord]:
    """Every game of one record file as KifuRecord; the child-process job of `read_games`."""
    return [_game_record(g) for g in parse_record_file(path)]


def read_games(path: str | os.PathLike[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[KifuRecord]:
    """Every game of one CSA/KIF/KI2 file, parsed in a child process (cshogi's parsers can crash).

    Raises ValueError naming the file and the cause when it cannot be read at all.
    """
    path = str(path)
    if Path(path).suffix.lower() not in RECORD_SUFFIXES:
        raise ValueError(f"{path}: unknown record format (expected {', '.join(RECORD_SUFFIXES)})")
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    outcome = next(run_isolated("dlzero.data.records:games_of_file", [path], timeout_s))
    if outcome.error is not None:
        raise ValueError(f"{path}: {outcome.error}")
    return outcome.value
