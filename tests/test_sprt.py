"""SPRT and Elo helpers used by gating."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlzero.gating.sprt import elo_from_score, elo_interval, llr, sprt_bounds, sprt_decision


def test_bounds_are_walds_formulas():
    lower, upper = sprt_bounds(0.05, 0.05)
    assert lower == pytest.approx(-2.944, abs=1e-3)
    assert upper == pytest.approx(2.944, abs=1e-3)
    assert sprt_bounds(0.05, 0.1) == pytest.approx((math.log(0.1 / 0.95), math.log(0.9 / 0.05)))
    assert sprt_decision(1, 0, 0, 0, 35, 0.05, 0.05)[2] == pytest.approx((lower, upper))


def test_decisions():
    assert sprt_decision(60, 20, 20, 0, 35, 0.05, 0.05)[0] == "accept"
    assert sprt_decision(20, 20, 60, 0, 35, 0.05, 0.05)[0] == "reject"
    assert sprt_decision(5, 2, 5, 0, 35, 0.05, 0.05)[0] == "continue"
    assert sprt_decision(0, 0, 0, 0, 35, 0.05, 0.05)[:2] == ("continue", 0.0)


def test_llr_is_finite_and_grows_with_a_run_of_wins():
    values = [llr(n, 0, 0, 0, 35) for n in range(1, 30)]
    assert all(math.isfinite(v) for v in values)
    assert values == sorted(values)
    assert values[0] < 2.944  # one game never decides


def _stream(p_win: float, p_draw: float, seed: int, limit: int = 2000) -> tuple[str, int]:
    rng = np.random.default_rng(seed)
    w = d = l = 0
    for n in range(1, limit + 1):
        r = rng.random()
        if r < p_win:
            w += 1
        elif r < p_win + p_draw:
            d += 1
        else:
            l += 1
        decision, _, _ = sprt_decision(w, d, l, 0, 35, 0.05, 0.05)
        if decision != "continue":
            return decision, n
    return "continue", limit


def test_sprt_stops_early_on_synthetic_streams():
    decision, n = _stream(0.65, 0.1, seed=1)
    assert decision == "accept" and n < 200
    decision, n = _stream(0.25, 0.1, seed=2)
    assert decision == "reject" and n < 200


def test_elo_from_score():
    assert elo_from_score(0.5) == 0.0
    assert elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)
    assert elo_from_score(0.25) == pytest.approx(-190.85, abs=0.01)
    assert math.isfinite(elo_from_score(1.0)) and math.isfinite(elo_from_score(0.0))


def test_elo_interval_contains_estimate_and_shrinks():
    elo, low, high = elo_interval(12, 6, 6)
    assert low < elo < high
    assert elo == pytest.approx(elo_from_score((12 + 3) / 24))
    elo10, low10, high10 = elo_interval(120, 60, 60)
    assert elo10 == pytest.approx(elo)
    assert high10 - low10 < (high - low) / 2
    assert elo_interval(0, 0, 0) == (0.0, -math.inf, math.inf)
    elo, low, high = elo_interval(0, 6, 0)  # all draws: estimate 0, but not a zero-width interval
    assert elo == 0.0 and low < -50 and high > 50
