"""The clock played out: `allocate`'s plans over whole games, every move costing MOVE_COST_MS beyond
its plan (root checks, the step that notices the limit, the drain, the pipe).

A game is this side's 150 moves of a 300-ply game (issue 51: no time loss, little of the clock left
unused). A move takes its target, or with `extended` twice its target within the hard limit (the search
extends a critical move that far), plus its cost; the increment comes after the move."""

from __future__ import annotations

import cshogi
import pytest

from dlzero.config import UsiConfig
from dlzero.engine.timeman import MOVE_COST_MS, Limits, allocate

DEFAULTS = UsiConfig()


def play_clock(main_ms: float, inc_ms: int, extended: bool, plies: int = 300,
               margin: int = DEFAULTS.byoyomi_margin_ms, reserve: int = DEFAULTS.time_margin_ms) -> float:
    """The main time left after this side's moves of a `plies`-ply game; AssertionError at a flag."""
    left = main_ms
    for ply in range(1, plies + 1, 2):
        budget = allocate(Limits(btime=int(left), wtime=int(left), binc=inc_ms, winc=inc_ms), cshogi.BLACK,
                          ply, margin, reserve)
        assert budget.target_ms is not None and budget.target_ms <= budget.hard_ms
        planned = min(2 * budget.target_ms, budget.hard_ms) if extended else budget.target_ms
        left -= planned + MOVE_COST_MS
        assert left >= 0, f"flagged at ply {ply} ({main_ms} ms + {inc_ms} ms)"
        left += inc_ms
    return left


def test_byoyomi_is_searched_to_its_end_less_the_margin():
    budget = allocate(Limits(byoyomi=1000), cshogi.BLACK, 40, 100, 1000)
    assert budget.target_ms == budget.hard_ms == 900 and budget.spend_all
    movetime = allocate(Limits(movetime=1000), cshogi.BLACK, 40, 100, 1000)
    assert movetime.hard_ms == 900 and movetime.spend_all
    # main time left beside the byoyomi (beyond the 1,000 ms reserve), or Fischer: a move that stops early saves it
    assert not allocate(Limits(btime=60_000, wtime=60_000, byoyomi=1000), cshogi.BLACK, 40, 100, 1000).spend_all
    assert allocate(Limits(btime=900, wtime=900, byoyomi=1000), cshogi.BLACK, 40, 100, 1000).spend_all
    assert not allocate(Limits(btime=10_000, wtime=10_000, binc=100, winc=100), cshogi.BLACK, 40, 100, 1000).spend_all


@pytest.mark.parametrize("extended", [False, True])
def test_fischer_10s_plus_100ms_never_flags_and_ends_on_its_reserve(extended):
    """The done-when clock of issue 51. Before, the plan added the whole increment and every move ran over
    it by its cost, bleeding the reserve a move at a time: flagged at ply 75 (103 without extensions)."""
    left = play_clock(10_000, 100, extended)
    assert left <= 0.125 * 10_000  # the reserve, an increment and the last moves' held-back cost


@pytest.mark.parametrize("main_ms", [60_000, 300_000])
def test_sudden_death_keeps_each_coming_moves_overhead_and_leaves_little(main_ms):
    """Before, dlshogi's divisor spent the clock geometrically and the moves' cost, which no plan paid
    for, flagged a 300-ply game at 60 s (ply 133) and at 300 s (ply 177)."""
    left = play_clock(main_ms, 0, extended=False)
    assert left <= 0.05 * main_ms


def test_the_increment_is_not_spent_before_it_comes():
    """A large increment: the hard limit stays within what the clock holds now, less a move's cost, so a
    clock that adds the increment after the move does not flag it; before, its hard limit was 11.9 s of a 3 s clock."""
    budget = allocate(Limits(btime=3_000, wtime=3_000, binc=10_000, winc=10_000), cshogi.BLACK, 60, 100, 1000)
    assert budget.hard_ms <= 3_000 - MOVE_COST_MS
