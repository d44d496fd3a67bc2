"""The maximum-likelihood rating fit on hand-made game tables with known answers."""

from __future__ import annotations

import math
import random

import pytest

from dlzero.gating.elo_fit import (
    ELO_PER_NAT,
    GameResult,
    Pairing,
    RatingFitError,
    fit_connected,
    fit_ratings,
    informative_components,
    main_reference,
    report_lines,
    scale_label,
    score_interval,
    tally_pairings,
)


def _games(a: str, b: str, wins: int, draws: int, losses: int) -> list[GameResult]:
    return ([GameResult(a, b, 1.0)] * wins + [GameResult(a, b, 0.5)] * draws + [GameResult(a, b, 0.0)] * losses)


def test_two_players_75_percent_is_190_8_elo():
    fit = fit_ratings(_games("x", "random", 300, 0, 100), prior_draws=0.0).by_player()
    assert fit["random"].elo == 0.0
    assert fit["x"].elo == pytest.approx(-400 * math.log10(1 / 0.75 - 1), abs=1e-6)
    assert round(fit["x"].elo, 1) == 190.8
    # draws are half points: 50 wins and 50 draws is the same 75 %
    fit_draws = fit_ratings(_games("x", "random", 50, 50, 0), prior_draws=0.0).by_player()
    assert fit_draws["x"].elo == pytest.approx(fit["x"].elo, abs=1e-6)
    # 95 % interval from the Fisher information: sigma = 1 / sqrt(n p (1 - p)) log-odds units
    sigma = ELO_PER_NAT / math.sqrt(400 * 0.75 * 0.25)
    assert fit["x"].elo_high - fit["x"].elo == pytest.approx(1.959964 * sigma, rel=1e-5)
    assert fit["x"].elo - fit["x"].elo_low == pytest.approx(1.959964 * sigma, rel=1e-5)
    assert fit["random"].elo_low == fit["random"].elo_high == 0.0
    assert fit["x"].games == 400 and fit["x"].score == 0.75


def test_prior_barely_moves_a_large_sample():
    fit = fit_ratings(_games("x", "random", 300, 0, 100)).by_player()
    assert fit["x"].elo == pytest.approx(-400 * math.log10(1 / (300.5 / 401) - 1), abs=1e-6)
    assert abs(fit["x"].elo - 190.85) < 1.0


def test_chain_adds_up():
    games = _games("a", "b", 75, 0, 25) + _games("b", "random", 75, 0, 25)
    fit = fit_ratings(games, prior_draws=0.0)
    by = fit.by_player()
    assert by["b"].elo == pytest.approx(190.849, abs=1e-3)
    assert by["a"].elo == pytest.approx(2 * 190.849, abs=2e-3)
    assert [r.player for r in fit.ratings] == ["a", "b", "random"]
    # a is measured through b, so its interval is wider than b's
    assert by["a"].elo_high - by["a"].elo_low > by["b"].elo_high - by["b"].elo_low


def test_maximum_matches_expected_scores():
    """At the maximum, every free player's expected points equal its actual points (an independent
    property of Bradley-Terry fits), here on a random table of five players."""
    rng = random.Random(7)
    players = ["random", "p1", "p2", "p3", "p4"]
    games = []
    for _ in range(300):
        a, b = rng.sample(players, 2)
        games.append(GameResult(a, b, rng.choice([0.0, 0.5, 1.0, 1.0])))
    elo = {r.player: r.elo for r in fit_ratings(games, prior_draws=0.0).ratings}
    for p in players[1:]:
        actual = expected = 0.0
        for g in games:
            if p in (g.player_a, g.player_b):
                mine = g.score_a if g.player_a == p else 1 - g.score_a
                other = g.player_b if g.player_a == p else g.player_a
                actual += mine
                expected += 1 / (1 + 10 ** (-(elo[p] - elo[other]) / 400))
        assert expected == pytest.approx(actual, abs=1e-6)


def test_reproducible_whatever_the_game_order():
    rng = random.Random(3)
    games = (_games("a", "random", 7, 2, 1) + _games("b", "a", 3, 3, 4) + _games("c", "b", 9, 0, 1)
             + _games("c", "random", 10, 0, 0))
    first = fit_ratings(games)
    for _ in range(3):
        shuffled = games[:]
        rng.shuffle(shuffled)
        assert fit_ratings(shuffled) == first


def test_all_wins_stays_finite_with_the_prior():
    games = _games("strong", "random", 20, 0, 0)
    by = fit_ratings(games).by_player()
    # one virtual draw: 20.5 / 21 points
    assert by["strong"].elo == pytest.approx(-400 * math.log10(21 / 20.5 - 1), abs=1e-6)
    assert math.isfinite(by["strong"].elo_high) and by["strong"].elo_high > by["strong"].elo
    by_loser = fit_ratings(_games("weak", "random", 0, 0, 20)).by_player()
    assert by_loser["weak"].elo == pytest.approx(-by["strong"].elo, abs=1e-6)
    with pytest.raises(RatingFitError, match="no finite"):
        fit_ratings(games, prior_draws=0.0)


def test_unconnected_players_and_missing_pin():
    games = _games("a", "random", 5, 0, 5) + _games("x", "y", 3, 0, 1)
    fit = fit_ratings(games)
    assert sorted(r.player for r in fit.ratings) == ["a", "random"]
    assert fit.unrated == ["x", "y"]
    with pytest.raises(RatingFitError, match="pinned player 'random'"):
        fit_ratings(_games("x", "y", 1, 0, 1))


# -- what the games can say: scores first, Elo only where informative pairings connect ----------------------
def test_score_interval_is_wilson():
    assert score_interval(0, 0, 0) == (0.5, 0.0, 1.0)
    score, low, high = score_interval(20, 0, 0)  # a sweep: a finite lower bound, not "exactly 1"
    assert score == 1.0 and high == 1.0 and low == pytest.approx(0.8389, abs=1e-4)
    score, low, high = score_interval(15, 0, 5)
    z = 1.959964
    centre = (0.75 + z * z / 40) / (1 + z * z / 20)
    half = z * math.sqrt(0.75 * 0.25 / 20 + z * z / 1600) / (1 + z * z / 20)
    assert (score, low, high) == pytest.approx((0.75, centre - half, centre + half), abs=1e-6)
    assert (low, high) == pytest.approx((0.531, 0.888), abs=1e-3)
    # draws are half points: 10 wins and 10 draws is the same 75 % and the same interval
    assert score_interval(10, 10, 0) == pytest.approx(score_interval(15, 0, 5))
    assert score_interval(0, 0, 20) == pytest.approx((0.0, 0.0, 1 - 0.8389), abs=1e-4)
    # rounding never puts the score outside its interval (error bars of plots are score - low, high - score)
    for wdl in [(40, 0, 0), (0, 0, 40), (7, 0, 0), (0, 3, 0), (13, 0, 0)]:
        score, low, high = score_interval(*wdl)
        assert low <= score <= high


def test_a_pairing_is_informative_unless_one_side_swept():
    assert not Pairing("a", "b", 20, 0, 0).informative and not Pairing("a", "b", 0, 0, 20).informative
    assert Pairing("a", "b", 19, 0, 1).informative and Pairing("a", "b", 0, 1, 19).informative
    assert Pairing("a", "b", 0, 20, 0).informative  # all draws: score 0.5, the gap is small
    assert not Pairing("a", "b", 0, 0, 0).informative


def test_a_chain_with_a_20_0_link_splits_and_one_with_19_1_does_not():
    chain = _games("b", "a", 12, 2, 6) + _games("c", "b", 13, 0, 7) + _games("d", "c", 14, 1, 5)
    assert informative_components(chain + _games("e", "d", 19, 0, 1)) == [["a", "b", "c", "d", "e"]]
    assert informative_components(chain + _games("e", "d", 20, 0, 0)) == [["a", "b", "c", "d"], ["e"]]
    assert informative_components(chain + _games("d", "e", 0, 0, 20)) == [["a", "b", "c", "d"], ["e"]]
    # a sweep in the middle makes two groups; a second, informative route joins them again
    middle = _games("b", "a", 12, 2, 6) + _games("c", "b", 20, 0, 0) + _games("d", "c", 14, 1, 5)
    assert informative_components(middle) == [["a", "b"], ["c", "d"]]
    assert informative_components(middle + _games("c", "a", 18, 1, 1)) == [["a", "b", "c", "d"]]


def test_fit_connected_rates_only_inside_informative_groups():
    games = (_games("x", "random", 20, 0, 0) + _games("y", "x", 15, 0, 5) + _games("z", "y", 12, 2, 6)
             + _games("z", "random", 20, 0, 0) + _games("q", "z", 20, 0, 0))
    with pytest.raises(RatingFitError, match="no finite"):  # the plain maximum over everything does not exist
        fit_ratings(games, prior_draws=0.0)
    fit = fit_connected(games, prior_draws=0.0, order=["random", "x", "y", "z"])
    assert fit.unrated == ["q", "random"]  # sweeps only: no Elo, whatever the prior
    assert {r.reference for r in fit.ratings} == {"x"}  # the first of `order` in the group is its zero
    by = fit.by_player()
    assert by["x"].elo == 0.0 and by["y"].elo == pytest.approx(190.849, abs=1e-3)
    # only the group's own games count: its Elos are those of a fit of them alone, pinned at x
    alone = fit_ratings(_games("y", "x", 15, 0, 5) + _games("z", "y", 12, 2, 6), pin="x", prior_draws=0.0)
    assert [(r.player, r.elo, r.elo_low, r.elo_high) for r in fit.ratings] == \
        [(r.player, r.elo, r.elo_low, r.elo_high) for r in alone.ratings]
    # the sweeps move nothing inside the group at any prior, where the joint fit slides with it
    inside = _games("y", "x", 15, 0, 5) + _games("z", "y", 12, 2, 6)
    for prior in (0.1, 1.0, 2.0):
        assert fit_connected(games, prior_draws=prior).ratings == fit_connected(inside, prior_draws=prior).ratings
    joint = [fit_ratings(games, prior_draws=p).by_player() for p in (0.1, 2.0)]
    assert joint[0]["y"].elo - joint[1]["y"].elo > 100
    assert fit.record("random") == (0, 0, 40) and fit.record("z") == (32, 2, 26)
    # where random is connected, it is the zero
    linked = fit_connected(_games("x", "random", 19, 0, 1) + _games("y", "x", 15, 0, 5), order=["x"])
    assert linked.unrated == [] and {r.reference for r in linked.ratings} == {"random"}
    assert linked.by_player()["random"].elo == 0.0


def test_groups_apart_from_random_each_get_their_own_zero():
    games = _games("a", "random", 20, 0, 0) + _games("b", "a", 10, 2, 8) + _games("d", "c", 9, 0, 11)
    fit = fit_connected(games, order=["random", "c", "a"])
    # groups in the order of their zero in `order`, each best first; players of no informative pairing last
    assert [(r.player, r.reference) for r in fit.ratings] == [("c", "c"), ("d", "c"), ("b", "a"), ("a", "a")]
    assert fit.unrated == ["random"]


def test_scale_labels_name_the_prior_and_the_zero():
    assert scale_label("random", 1.0) == "Elo (1 virtual draw per pairing, random = 0)"
    assert scale_label("alphabeta:1", 0.5) == "Elo (0.5 virtual draws per pairing, alphabeta:1 = 0)"
    assert scale_label("B", 0) == "Elo (no prior, B = 0)"
    assert scale_label("random", None) == "Elo (prior not recorded, random = 0)"
    assert fit_ratings(_games("x", "random", 3, 0, 1), prior_draws=2.0).label("random") == \
        "Elo (2 virtual draws per pairing, random = 0)"
    assert main_reference(["a", "random", "a"]) == "a" and main_reference(["a", "random"]) == "random"
    assert main_reference([]) is None


def test_pairings_are_counted_from_the_later_side_of_the_order():
    games = _games("a", "random", 20, 0, 0) + [GameResult("random", "a", 0.5)] + _games("m", "a", 1, 0, 2)
    assert tally_pairings(games, order=["random", "a"]) == [Pairing("a", "random", 20, 1, 0),
                                                            Pairing("m", "a", 1, 0, 2)]
    assert tally_pairings(games, order=["a", "random"])[0] == Pairing("random", "a", 0, 1, 20)


def test_report_lists_the_pairings_first_then_each_scale():
    games = _games("a", "random", 20, 0, 0) + _games("b", "a", 10, 2, 8)
    lines = report_lines(fit_connected(games, order=["random", "a"]))
    assert lines[0].split()[:4] == ["player", "opponent", "W-D-L", "score"]
    assert lines[1].split()[:5] == ["a", "random", "20-0-0", "1.000", "[0.839,"] and "sweep" in lines[1]
    assert lines[2].split()[:6] == ["b", "a", "10-2-8", "0.550", "[0.342,", "0.742]"] and "sweep" not in lines[2]
    assert lines[4] == ("Elo (1 virtual draw per pairing, a = 0) (not connected to random by informative "
                        "pairings)")
    assert [line.split()[0] for line in lines[6:8]] == ["b", "a"] and "(pinned)" in lines[7]
    assert lines[9] == "not connected (sweeps only): no Elo" and lines[11].split() == ["random", "0-0-20"]
