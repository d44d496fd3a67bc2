"""SPRT and Elo helpers used by gating."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlzero.gating.sprt import (
    elo_from_score,
    elo_interval,
    llr,
    pair_category,
    pair_elo_interval,
    pair_llr,
    pair_sprt_decision,
    sprt_bounds,
    sprt_decision,
)


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


# -- pentanomial (colour-swapped pairs) ------------------------------------------------------------------
def test_pair_llr_hand_worked():
    # pairs scoring 0, 1/2, 1, 3/2, 2 points: 0, 1, 2, 4, 3; plus 0.25 per category -> n = 11.25,
    # per-game scores 0, .25, .5, .75, 1: sum = .3125 + 1.125 + 3.1875 + 3.25 = 7.875, mean = 0.7,
    # variance = (.25*.49 + 1.25*.2025 + 2.25*.04 + 4.25*.0025 + 3.25*.09) / 11.25 = .76875 / 11.25,
    # s0 = 0.5, s1 = 1 / (1 + 10^(-35/400)) = 0.550199;
    # LLR = n (s1 - s0) (2 mean - s0 - s1) / (2 var) = 11.25 * .050199 * .349801 / .136667 = 1.4455
    assert pair_llr([0, 1, 2, 4, 3], 0, 35) == pytest.approx(1.4455, abs=1e-4)
    assert pair_sprt_decision([0, 1, 2, 4, 3], 0, 35, 0.05, 0.05)[0] == "continue"
    assert pair_llr([0, 0, 0, 0, 0], 0, 35) == 0.0
    # the mirror image is as strong evidence the other way for the mirrored hypotheses
    assert pair_llr([3, 4, 2, 1, 0], 0, -35) == pytest.approx(1.4455, abs=1e-4)


def test_pair_elo_interval_hand_worked():
    # mean of the counts themselves: (1*.25 + 2*.5 + 4*.75 + 3*1) / 10 = 0.725 -> Elo 168.40;
    # half-width 1.959964 * sqrt(.068333 / 10) = 0.162018 -> scores 0.562982, 0.887018 -> Elo 44.00, 357.97
    elo, low, high = pair_elo_interval([0, 1, 2, 4, 3])
    assert (elo, low, high) == pytest.approx((168.40, 44.00, 357.97), abs=0.01)
    assert pair_elo_interval([0, 0, 0, 0, 0]) == (0.0, -math.inf, math.inf)


def test_pairs_of_independent_games_agree_with_the_trinomial_model():
    """With no correlation inside a pair, N pairs carry the evidence of 2N independent games."""
    win, draw, loss = 0.45, 0.2, 0.35
    game = {1.0: win, 0.5: draw, 0.0: loss}
    pair = [0.0] * 5
    for s1, p1 in game.items():
        for s2, p2 in game.items():
            pair[pair_category(s1 + s2)] += p1 * p2
    n_pairs = 20000
    penta = pair_llr([round(p * n_pairs) for p in pair], 0, 35)
    tri = llr(round(win * 2 * n_pairs), round(draw * 2 * n_pairs), round(loss * 2 * n_pairs), 0, 35)
    assert penta == pytest.approx(tri, rel=2e-3)
    assert pair_elo_interval([round(p * n_pairs) for p in pair]) == pytest.approx(
        elo_interval(round(win * 2 * n_pairs), round(draw * 2 * n_pairs), round(loss * 2 * n_pairs)), rel=2e-3)


def test_pairs_cancel_an_opening_bias():
    """Every pair won by whoever had the better side of its opening: 1 point each, equal players.
    Counted as independent games that is a noisy 50%; counted as pairs it is a clear "no stronger"."""
    n = 20
    assert pair_sprt_decision([0, 0, n, 0, 0], 0, 35, 0.05, 0.05)[0] == "reject"
    assert sprt_decision(n, 0, n, 0, 35, 0.05, 0.05)[0] == "continue"
    low, high = pair_elo_interval([0, 0, n, 0, 0])[1:]
    assert high - low < (elo_interval(n, 0, n)[2] - elo_interval(n, 0, n)[1]) / 3


def test_pair_category_checks_its_input():
    assert [pair_category(p) for p in (0, 0.5, 1, 1.5, 2)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="0, 0.5, 1, 1.5 or 2"):
        pair_category(2.5)
    with pytest.raises(ValueError, match="5 entries"):
        pair_llr([1, 2, 3], 0, 35)
