"""When a game is over, and who won: the one place the game-end rules live.

Search leaves, self-play, the arena and the engine all ask `game_end`; where they need different
rules, the difference is a field of `GameRules`, not another copy of the code. The checks run in
one order, from the side to move's point of view:

1. repetition (cshogi `is_draw`): once the position has occurred `repetitions` times before, a plain
   repetition is a draw and perpetual check loses for the side that gave it. The search's first
   repetition looks back `REPETITION_PLIES` plies (a leaf check, kept cheap); the rules of the game
   (`repetitions` > 1) look back over the whole game, so a cycle of any length ends it (with a
   16-ply window a 12-ply cycle never reached its fourth occurrence: teacher games ran on to the
   move cap). With `superior_repetition` a repetition where one side holds more in hand ends the
   game in its favour (a search shortcut, not a rule of the game);
2. no legal move: the side to move is mated and loses;
3. declaration (entering king, `declaration` rule): the side to move can declare and wins;
4. the move cap: `board.move_number > max_moves` is a draw.

Mate before the move cap: a move that mates on the last allowed ply wins, as in CSA play. A
repeated position is never mated (its first occurrence would have ended the game), so the order of
1 and 2 only matters for speed.

`leaf_value` is the search's form: the same verdict as a win rate for the side to move, with a
draw worth the mover's draw value (dlshogi's contempt: the value belongs to the player who moved
into the draw, so the backup stays zero-sum edge by edge).

Declaration rules (YaneuraOu's `EnteringKingRule`; the points are big pieces 5, others 1, counting
the declarer's pieces in hand and in the enemy camp, king excluded; the king must be in the enemy
camp, not in check, with at least 10 other pieces there):
- "27": the CSA rule, 28 points for Black, 27 for White (cshogi `LAW_27`);
- "24": 31 points for either side (cshogi `LAW_24`; 24-30 points would only draw, so a declaration
  is taken as a win only at 31 or more, as YaneuraOu does);
- "none": no declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

import cshogi

REPETITION_PLIES = 16  # how far back cshogi's is_draw looks for an earlier occurrence

# how a game ended (Verdict.reason; also stored by self-play and the arena)
END_MATE = "mate"
END_REPETITION = "repetition"
END_PERPETUAL_CHECK = "perpetual_check"
END_SUPERIOR_REPETITION = "superior_repetition"
END_DECLARATION = "declaration"
END_MAX_MOVES = "max_moves"

DECLARATION_RULES = ("27", "24", "none")
_LAW = {"27": cshogi.LAW_27, "24": cshogi.LAW_24}

# cshogi.is_draw -> (side to move wins?, reason); None in the first slot: a draw
_REPETITION = {
    cshogi.REPETITION_DRAW: (None, END_REPETITION),
    cshogi.REPETITION_WIN: (True, END_PERPETUAL_CHECK),    # the opponent gave perpetual check
    cshogi.REPETITION_LOSE: (False, END_PERPETUAL_CHECK),  # we gave perpetual check
    cshogi.REPETITION_SUPERIOR: (True, END_SUPERIOR_REPETITION),  # same board, we hold more in hand
    cshogi.REPETITION_INFERIOR: (False, END_SUPERIOR_REPETITION),
}


@dataclass(frozen=True)
class GameRules:
    """The rules a caller plays by; each field is one of the ways callers legitimately differ.

    `repetitions`: earlier occurrences of the position that end the game: 1 (the first repetition,
    as the search scores it), 3 (the fourth occurrence: sennichite as the rules have it), 0 (never:
    the engine leaves that to the GUI). `max_moves`: 0 means no cap. `declaration`: "27", "24" or
    "none" (the config key `search.entering_king_rule`). The draw values matter only to `leaf_value`.
    """

    repetitions: int = 1
    superior_repetition: bool = False
    max_moves: int = 0
    declaration: str = "27"
    draw_value_black: float = 0.5
    draw_value_white: float = 0.5

    def __post_init__(self) -> None:
        if self.declaration not in DECLARATION_RULES:
            raise ValueError(f"declaration rule must be one of {', '.join(DECLARATION_RULES)}, "
                             f"not {self.declaration!r}")
        if not 0 <= self.repetitions <= 3:
            raise ValueError(f"repetitions must be 0 (off) to 3, not {self.repetitions}")


@dataclass(frozen=True)
class Verdict:
    """A finished game: the winner (cshogi.BLACK, cshogi.WHITE, or None for a draw) and why."""

    winner: int | None
    reason: str


def earlier_occurrences(board: cshogi.Board, lookback: int = 2 * REPETITION_PLIES) -> int:
    """How often the current position (board, hands, side to move) occurred within `lookback` plies."""
    key = board.zobrist_hash()
    popped = []
    count = 0
    for _ in range(min(lookback, len(board.history))):
        popped.append(board.pop())
        if len(popped) % 2 == 0 and board.zobrist_hash() == key:
            count += 1
    for move in reversed(popped):
        board.push(move)
    return count


def can_declare(board: cshogi.Board, rule: str) -> bool:
    """Whether the side to move wins by declaring under `rule` ("27", "24" or "none")."""
    return rule != "none" and board.is_nyugyoku(_LAW[rule])


def _repetition(board: cshogi.Board, rules: GameRules) -> Verdict | None:
    if not rules.repetitions:
        return None
    whole_game = rules.repetitions > 1
    rep = board.is_draw(len(board.history) if whole_game else REPETITION_PLIES)
    outcome = _REPETITION.get(rep)
    if outcome is None:
        return None
    we_win, reason = outcome
    if reason == END_SUPERIOR_REPETITION and not rules.superior_repetition:
        return None
    if whole_game and earlier_occurrences(board, len(board.history)) < rules.repetitions:
        return None
    if we_win is None:
        return Verdict(None, reason)
    return Verdict(board.turn if we_win else 1 - board.turn, reason)


def game_end(board: cshogi.Board, rules: GameRules, n_legal: int | None = None) -> Verdict | None:
    """The verdict if the game is over with `board`'s side to move, else None.

    `n_legal` saves generating the moves when the caller already has them.
    """
    verdict = _repetition(board, rules)
    if verdict is not None:
        return verdict
    if n_legal is None:
        n_legal = 0 if board.is_game_over() else 1
    if n_legal == 0:
        return Verdict(1 - board.turn, END_MATE)
    if can_declare(board, rules.declaration):
        return Verdict(board.turn, END_DECLARATION)
    if rules.max_moves and board.move_number > rules.max_moves:
        return Verdict(None, END_MAX_MOVES)
    return None


def draw_value(rules: GameRules, colour: int) -> float:
    """Win rate a draw is worth to `colour` when `colour` makes the drawing move."""
    return rules.draw_value_black if colour == cshogi.BLACK else rules.draw_value_white


def verdict_value(verdict: Verdict, board: cshogi.Board, rules: GameRules) -> float:
    """A verdict as a win rate for `board`'s side to move (a draw: 1 - the mover's draw value)."""
    if verdict.winner is None:
        return 1.0 - draw_value(rules, 1 - board.turn)
    return 1.0 if verdict.winner == board.turn else 0.0


def leaf_value(board: cshogi.Board, rules: GameRules, n_legal: int | None = None) -> float | None:
    """The search's form of `game_end`: the proven win rate for the side to move, or None."""
    verdict = game_end(board, rules, n_legal)
    return None if verdict is None else verdict_value(verdict, board, rules)
