"""The maximum-likelihood rating fit on hand-made game tables with known answers."""

from __future__ import annotations

import math
import random

import pytest

from dlzero.gating.elo_fit import ELO_PER_NAT, GameResult, RatingFitError, fit_ratings


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
