"""How a played game is stored: the hcpe3 result byte of its verdict, and the record an opening starts.

Self-play and the teacher's own games both write hcpe3 records; they take both from here, so the
two kinds of training data cannot disagree on how a game that ended the same way is stored.

The result byte (`dlzero.data.hcpe3`) holds who won in bits 0-1 (draw, Black, White) and, as flag
bits, which rule ended the game: 0x4 repetition (sennichite), 0x8 declaration (nyugyoku), 0x10 the
move cap. A game that ended otherwise (mate, resignation, an adjudicated or announced mate) stores
the winner alone. The winner always comes from the verdict; a flag never changes who won.

Perpetual check is decided here once: it stores the winner (the side that was checked: the checker
loses, as `dlzero.game_end` rules) **and** the repetition flag, because the game ended by the
sennichite rule (its fourth occurrence) like any repetition. The flag says how, the winner bits who.
Without the flag a perpetual-check win could not be told from a mate in the record. dlshogi's own
self-play leaves the flag off a perpetual check (it flags only repetition draws); its readers, like
ours, take the result from bits 0-1 alone (`make_result`), so the flag changes no training target.
A superior repetition (a search shortcut, never a game end under `play_rules`) is flagged alike.
"""

from __future__ import annotations

import cshogi

from dlzero.data.hcpe3 import (
    BLACK_WIN,
    FLAG_MAX_MOVES,
    FLAG_NYUGYOKU,
    FLAG_REPETITION,
    RESULT_DRAW,
    WHITE_WIN,
    Hcpe3Record,
    MoveRecord,
)
from dlzero.game_end import (
    END_DECLARATION,
    END_MAX_MOVES,
    END_PERPETUAL_CHECK,
    END_REPETITION,
    END_SUPERIOR_REPETITION,
    Verdict,
)
from dlzero.position import start_board

# a verdict's reason -> the hcpe3 flag stored with the winner; every other reason has none
RESULT_FLAGS = {
    END_REPETITION: FLAG_REPETITION,
    END_PERPETUAL_CHECK: FLAG_REPETITION,
    END_SUPERIOR_REPETITION: FLAG_REPETITION,
    END_DECLARATION: FLAG_NYUGYOKU,
    END_MAX_MOVES: FLAG_MAX_MOVES,
}


def win_code(colour: int) -> int:
    """The hcpe3 winner code of a win for `colour` (cshogi.BLACK or cshogi.WHITE)."""
    return BLACK_WIN if colour == cshogi.BLACK else WHITE_WIN


def result_byte(verdict: Verdict) -> int:
    """The hcpe3 result of a finished game: the winner (or a draw) and the flag of the rule that ended it."""
    result = RESULT_DRAW if verdict.winner is None else win_code(verdict.winner)
    return result | RESULT_FLAGS.get(verdict.reason, 0)


def opening_record(board: cshogi.Board) -> Hcpe3Record:
    """A record starting where `board`'s history starts, its moves as replay-only plies (no targets).

    A game from an opening line is stored from the line's start, so training sees the same ply count
    and repetition history as the players did."""
    record = Hcpe3Record.from_board(start_board(board))
    record.moves = [MoveRecord(cshogi.move16(m)) for m in board.history]
    return record
