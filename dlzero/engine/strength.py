"""Levels for people: `Strength` 1-20 (USI), weaker the way a person is weaker, not by random blunders.

Three knobs move together with the level (`LEVELS`):
- the search gets fewer playouts (1 at level 1, 4,096 at 19), so a weak level sees less far;
- the move is drawn from the root's moves with weights (visits + prior) ** (1 / T), so it sometimes plays the
  second or third move it liked; never a move the search proved lost;
- at the bottom (levels 1-6) the draw is over the few moves a player would consider (the `candidates` moves
  with the most visits, then prior) at a temperature above 1: a beginner picks among plausible moves almost
  evenly, where a stronger player nearly always takes the one they like best. Without this the bottom was flat
  and strong: at 2-42 playouts and temperatures below 1 the draw nearly always took the network's first choice,
  and levels 1-8 all sat between `alphabeta:300` and Fairy-Stockfish at 1,000 nodes (docs/usi-options.md).
Level 20 is the engine at full strength: the clock's playouts and the most-visited move. A proven win is always
played: a person at any level takes a mate they can see.
"""

from __future__ import annotations

import dataclasses
import random

from dlzero.engine.player import Analysis

FULL = 20
LOWEST = 1


@dataclasses.dataclass(frozen=True)
class Level:
    """One level's knobs: the most playouts a move, the draw's temperature (0: the most visited move) and how
    many moves the draw is over (None: every move the search did not prove lost)."""

    playouts: int
    temperature: float
    candidates: int | None = None


def _upper(level: int) -> Level:
    """Levels 7-19: playouts double every 1/0.6 ~ 1.7 levels (28 at 7, 4,096 at 19) and the temperature falls
    linearly to 0 at 19: the first curve, which levels 7-19 keep (levels 1-6 were flat and strong on it)."""
    return Level(round(2 ** (0.6 * (level + 1))), 0.75 * (FULL - 1 - level) / (FULL - 2))


LEVELS: dict[int, Level] = {
    1: Level(1, 4.0, 5),
    2: Level(2, 2.5, 6),
    3: Level(3, 1.8, 6),
    4: Level(5, 1.4, 8),
    5: Level(8, 1.1, 8),
    6: Level(12, 0.85, 10),
    **{level: _upper(level) for level in range(7, FULL)},
}


def check_level(level: int) -> int:
    """`level` if it is one (1-20), else a ValueError that says the range."""
    if not LOWEST <= level <= FULL:
        raise ValueError(f"strength level {level}: levels run from {LOWEST} (weakest) to {FULL} (full strength)")
    return level


def level_playouts(level: int) -> int | None:
    """The most playouts a move at `level`; None at full strength (the clock's)."""
    check_level(level)
    return None if level == FULL else LEVELS[level].playouts


def level_temperature(level: int) -> float:
    """The temperature over the root's moves at `level`: 0 (the most visited move) from level 19 up."""
    check_level(level)
    return 0.0 if level == FULL else LEVELS[level].temperature


def level_candidates(level: int) -> int | None:
    """How many moves `level`'s draw is over; None for all of them."""
    check_level(level)
    return None if level == FULL else LEVELS[level].candidates


def weaken(result: Analysis, level: int, rng: random.Random) -> Analysis:
    """`result` with its move drawn at `level`'s temperature, from weights (visits + prior) ** (1 / T) over the
    level's candidate moves (the most visited, then the highest prior); the result as it is at temperature 0,
    for a declaration, a resignation, a proven win, or a root with one move."""
    temperature = level_temperature(level)
    moves = [m for m in result.moves if m.proven != 0.0]  # never a move the search proved lost
    if temperature == 0.0 or result.bestmove in ("resign", "win") or (result.mate or 0) > 0 or len(moves) < 2:
        return result
    moves.sort(key=lambda m: (m.visits, m.prior), reverse=True)
    moves = moves[:level_candidates(level)]
    weights = [(m.visits + m.prior) ** (1.0 / temperature) for m in moves]
    choice = rng.choices(moves, weights=weights)[0]
    if choice.usi == result.bestmove:
        return result
    return dataclasses.replace(result, bestmove=choice.usi, ponder=None, pv=[choice.usi])
