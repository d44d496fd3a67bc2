"""One maximum-likelihood rating list over all games played (Bradley-Terry, as Ordo and BayesElo do).

Model: player i scores against player j with expectation p_ij = 1 / (1 + 10^(-(r_i - r_j) / 400)) (the
logistic Elo curve). A draw counts as half a win and half a loss, so a game scored s contributes
s log p_ij + (1 - s) log(1 - p_ij) to the log-likelihood; no separate draw parameter is fitted (draws
only pull the two ratings together, like a win and a loss between them).

Pin: the ratings are only defined up to a common shift, so one player (the random mover) is fixed at 0;
everyone else is measured against it through the chain of games.

Prior: a player who won (or lost) every game has no finite maximum. As BayesElo does, every pair of
players that met gets `prior_draws` virtual draws (default 1: half a win each way), which keeps the fit
finite and pulls small samples slightly towards "equal"; with 0 the fit is the plain maximum likelihood
(and fails with a clear error when it does not exist).

Error bars: the covariance of the free ratings is the inverse of the negative Hessian of the
log-likelihood at the optimum (Fisher information); `low`/`high` are the rating -/+ z * sigma (z = 1.96
for 95 %), relative to the pinned player. The fit is deterministic: results are aggregated per pair
in sorted player order and solved by Newton's method from all-zero ratings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from dlzero.errors import DlzeroError

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per unit of log-odds
DEFAULT_PRIOR_DRAWS = 1.0
MAX_ITERATIONS = 200
TOLERANCE = 1e-9  # log-odds units


class RatingFitError(DlzeroError):
    """The games do not determine a rating list (nobody connected to the pin, or no finite maximum)."""


@dataclass(frozen=True)
class GameResult:
    """One game: `score_a` is 1, 0.5 or 0 for `player_a`."""

    player_a: str
    player_b: str
    score_a: float


@dataclass(frozen=True)
class Rating:
    """A player's fitted rating (Elo, relative to the pinned player) with its confidence interval."""

    player: str
    elo: float
    elo_low: float
    elo_high: float
    games: int
    score: float  # points per game over its real games (no virtual draws)


@dataclass
class RatingList:
    """The fit: ratings best first, and the players it could not rate (not connected to the pin)."""

    ratings: list[Rating]
    unrated: list[str]
    pin: str

    def by_player(self) -> dict[str, Rating]:
        return {r.player: r for r in self.ratings}


def _connected(players: list[str], pairs: dict[tuple[int, int], list[float]], start: int) -> set[int]:
    neighbours: dict[int, set[int]] = {i: set() for i in range(len(players))}
    for i, j in pairs:
        neighbours[i].add(j)
        neighbours[j].add(i)
    seen, todo = {start}, [start]
    while todo:
        for nxt in neighbours[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def fit_ratings(games: Iterable[GameResult], pin: str = "random", prior_draws: float = DEFAULT_PRIOR_DRAWS,
                confidence: float = 0.95) -> RatingList:
    """Fit ratings to `games` with `pin` at 0 (see the module docstring for the model and the prior)."""
    if prior_draws < 0:
        raise ValueError(f"prior_draws must be >= 0, got {prior_draws}")
    games = list(games)
    players = sorted({g.player_a for g in games} | {g.player_b for g in games})
    if pin not in players:
        raise RatingFitError(f"no games of the pinned player '{pin}': it must play for ratings to mean anything")
    index = {p: i for i, p in enumerate(players)}
    # per pair (i < j): [games, points of i]
    pairs: dict[tuple[int, int], list[float]] = {}
    played = np.zeros(len(players), dtype=np.int64)
    points = np.zeros(len(players))
    for g in games:
        if g.player_a == g.player_b:
            raise RatingFitError(f"a game of '{g.player_a}' against itself cannot be rated")
        if g.score_a not in (0.0, 0.5, 1.0):
            raise RatingFitError(f"score {g.score_a!r} of {g.player_a} vs {g.player_b} is not 0, 1/2 or 1")
        a, b = index[g.player_a], index[g.player_b]
        i, j, s = (a, b, g.score_a) if a < b else (b, a, 1.0 - g.score_a)
        cell = pairs.setdefault((i, j), [0.0, 0.0])
        cell[0] += 1.0
        cell[1] += s
        played[a] += 1
        played[b] += 1
        points[a] += g.score_a
        points[b] += 1.0 - g.score_a
    reach = _connected(players, pairs, index[pin])
    free = [i for i in sorted(reach) if i != index[pin]]
    unrated = [players[i] for i in range(len(players)) if i not in reach]
    theta = _newton(pairs, index[pin], free, len(players), prior_draws)
    cov = np.linalg.inv(-_hessian(theta, pairs, free, prior_draws)) if free else np.zeros((0, 0))
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    ratings = []
    for i in sorted(reach):
        elo = float(theta[i]) * ELO_PER_NAT + 0.0  # + 0.0: no "-0"
        sigma = math.sqrt(max(float(cov[free.index(i), free.index(i)]), 0.0)) * ELO_PER_NAT if i in free else 0.0
        ratings.append(Rating(players[i], elo, elo - z * sigma, elo + z * sigma, int(played[i]),
                              float(points[i] / played[i])))
    ratings.sort(key=lambda r: (-r.elo, r.player))
    return RatingList(ratings, unrated, pin)


def _pair_terms(theta: np.ndarray, pairs: dict[tuple[int, int], list[float]], prior_draws: float):
    for (i, j), (n, s) in pairs.items():
        p = 1.0 / (1.0 + math.exp(-(theta[i] - theta[j])))
        yield i, j, n + prior_draws, s + prior_draws / 2.0, p


def _log_likelihood(theta: np.ndarray, pairs: dict[tuple[int, int], list[float]], prior_draws: float) -> float:
    total = 0.0
    for _, _, n, s, p in _pair_terms(theta, pairs, prior_draws):
        p = min(max(p, 1e-300), 1.0 - 1e-16)
        total += s * math.log(p) + (n - s) * math.log(1.0 - p)
    return total


def _gradient(theta: np.ndarray, pairs, free: list[int], prior_draws: float) -> np.ndarray:
    pos = {k: m for m, k in enumerate(free)}
    grad = np.zeros(len(free))
    for i, j, n, s, p in _pair_terms(theta, pairs, prior_draws):
        d = s - n * p
        if i in pos:
            grad[pos[i]] += d
        if j in pos:
            grad[pos[j]] -= d
    return grad


def _hessian(theta: np.ndarray, pairs, free: list[int], prior_draws: float) -> np.ndarray:
    pos = {k: m for m, k in enumerate(free)}
    hess = np.zeros((len(free), len(free)))
    for i, j, n, _, p in _pair_terms(theta, pairs, prior_draws):
        w = n * p * (1.0 - p)
        if i in pos:
            hess[pos[i], pos[i]] -= w
        if j in pos:
            hess[pos[j], pos[j]] -= w
        if i in pos and j in pos:
            hess[pos[i], pos[j]] += w
            hess[pos[j], pos[i]] += w
    return hess


def _newton(pairs, pin: int, free: list[int], n_players: int, prior_draws: float) -> np.ndarray:
    """Maximise the (concave) log-likelihood over the free ratings; the pin stays 0."""
    theta = np.zeros(n_players)
    if not free:
        return theta
    current = _log_likelihood(theta, pairs, prior_draws)
    for _ in range(MAX_ITERATIONS):
        grad = _gradient(theta, pairs, free, prior_draws)
        try:
            step = np.linalg.solve(_hessian(theta, pairs, free, prior_draws), -grad)
        except np.linalg.LinAlgError:
            break
        t = 1.0
        while t > 1e-6:  # backtracking: never accept a step that lowers the likelihood
            trial = theta.copy()
            trial[free] += t * step
            value = _log_likelihood(trial, pairs, prior_draws)
            if value >= current - 1e-12:
                break
            t /= 2.0
        theta, current = trial, value
        if np.max(np.abs(t * step)) < TOLERANCE:
            if np.max(np.abs(theta)) * ELO_PER_NAT > 10_000:
                break  # drifting to infinity: no finite maximum
            return theta
    raise RatingFitError("the ratings have no finite maximum-likelihood value (a player won or lost every "
                         "game); fit with prior_draws > 0")
