"""Levels for people: `Strength` 1-20 (USI), weaker the way a person is weaker, not by random blunders.

Two knobs move together with the level. The search gets fewer playouts (`level_playouts`: 2 at level 1, 4,096 at
19), so a weak level sees less far; and the move is drawn from the root's visits and priors with a
temperature (`level_temperature`: 0.75 at level 1, falling to 0 at 19), so it sometimes plays the second or third
move it liked, never a move the search gave nothing. Level 20 is the engine at full strength: the clock's playouts
and the most-visited move. A proven win is always played: a person at any level takes a mate they can see.
"""

from __future__ import annotations

import dataclasses
import random

from dlzero.engine.player import Analysis

FULL = 20
LOWEST = 1
_GROWTH = 0.6  # playouts double every 1/0.6 ~ 1.7 levels: 2 at level 1, 97 at 10, 4,096 at 19
_TOP_TEMPERATURE = 0.75


def check_level(level: int) -> int:
    """`level` if it is one (1-20), else a ValueError that says the range."""
    if not LOWEST <= level <= FULL:
        raise ValueError(f"strength level {level}: levels run from {LOWEST} (weakest) to {FULL} (full strength)")
    return level


def level_playouts(level: int) -> int | None:
    """The most playouts a move at `level`; None at full strength (the clock's)."""
    check_level(level)
    return None if level == FULL else round(2 ** (_GROWTH * (level + 1)))


def level_temperature(level: int) -> float:
    """The temperature over the root's visits at `level`: 0 (the most visited move) from level 19 up."""
    check_level(level)
    return max(0.0, _TOP_TEMPERATURE * (FULL - 1 - level) / (FULL - 1 - LOWEST))


def weaken(result: Analysis, level: int, rng: random.Random) -> Analysis:
    """`result` with its move drawn at `level`'s temperature, from weights (visits + prior) ** (1 / T) over the
    moves the search considered; the result as it is at temperature 0, for a declaration, a resignation, a proven
    win, or a root with one move."""
    temperature = level_temperature(level)
    moves = [m for m in result.moves if m.proven != 0.0]  # never a move the search proved lost
    if temperature == 0.0 or result.bestmove in ("resign", "win") or (result.mate or 0) > 0 or len(moves) < 2:
        return result
    weights = [(m.visits + m.prior) ** (1.0 / temperature) for m in moves]
    choice = rng.choices(moves, weights=weights)[0]
    if choice.usi == result.bestmove:
        return result
    return dataclasses.replace(result, bestmove=choice.usi, ponder=None, pv=[choice.usi])
