"""Sequential probability ratio test and Elo estimates for gating on win/draw/loss counts.

Gating asks "is the candidate at least `elo1` stronger, or at most `elo0`?" and should stop as soon
as the games played answer it, at error rates `alpha` (promoting a candidate no better than `elo0`)
and `beta` (rejecting one as good as `elo1`). Wald's SPRT does that with the fewest games on average.

The likelihood ratio uses the normal approximation that Fishtest-style testers use for trinomial
(win/draw/loss) results (a generalised SPRT). A game's score X is 1, 1/2 or 0; under a hypothesis of
Elo e the mean score is s(e) = 1 / (1 + 10^(-e/400)). With the sample mean x and per-game variance
v estimated from the games, the log-likelihood of N games under mean s is, up to terms that cancel
in the ratio, -N (x - s)^2 / (2 v). Hence

    LLR = N / (2 v) * [(x - s0)^2 - (x - s1)^2] = N (s1 - s0) (2x - s0 - s1) / (2 v).

Wald's bounds: accept H1 when LLR >= ln((1 - beta) / alpha), reject (accept H0) when
LLR <= ln(beta / (1 - alpha)).

A gate sees few games, often all wins or all draws at first, where v = 0 makes the LLR unbounded
and one game would decide. So the counts get a pseudo-count of half a game for each outcome (mean
1/2, like a Jeffreys prior): it keeps v > 0, pulls early results slightly towards "equal" (slower
to decide either way, never faster) and is negligible once tens of games are in.
"""

from __future__ import annotations

import math
from statistics import NormalDist

PSEUDO_COUNT = 0.5
SCORE_EPS = 1e-3  # scores are clamped to [eps, 1 - eps] before turning them into Elo (about +-1200)

Decision = str  # "accept" | "reject" | "continue"


def score_from_elo(elo: float) -> float:
    """Expected score of a player `elo` points stronger (logistic Elo model)."""
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def elo_from_score(score: float) -> float:
    """Elo difference that gives the expected `score`; scores are clamped into (0, 1)."""
    s = min(max(score, SCORE_EPS), 1.0 - SCORE_EPS)
    return -400.0 * math.log10(1.0 / s - 1.0) + 0.0  # + 0.0: no "-0" for an even score


def sprt_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's (lower, upper) LLR bounds for error rates alpha (false accept) and beta (false reject)."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def _mean_and_variance(w: float, d: float, l: float) -> tuple[float, float, float]:
    """(games, mean score, per-game score variance) of win/draw/loss counts."""
    n = w + d + l
    mean = (w + 0.5 * d) / n
    var = (w * (1.0 - mean) ** 2 + d * (0.5 - mean) ** 2 + l * mean ** 2) / n
    return n, mean, var


def llr(w: int, d: int, l: int, elo0: float, elo1: float) -> float:
    """Log-likelihood ratio of H1 (Elo = elo1) against H0 (Elo = elo0) for the results so far."""
    if w + d + l == 0:
        return 0.0
    n, mean, var = _mean_and_variance(w + PSEUDO_COUNT, d + PSEUDO_COUNT, l + PSEUDO_COUNT)
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    return n * (s1 - s0) * (2.0 * mean - s0 - s1) / (2.0 * var)


def sprt_decision(w: int, d: int, l: int, elo0: float, elo1: float, alpha: float, beta: float
                  ) -> tuple[Decision, float, tuple[float, float]]:
    """("accept" | "reject" | "continue", LLR, (lower, upper)) for the results so far."""
    bounds = sprt_bounds(alpha, beta)
    value = llr(w, d, l, elo0, elo1)
    if value >= bounds[1]:
        return "accept", value, bounds
    if value <= bounds[0]:
        return "reject", value, bounds
    return "continue", value, bounds


def elo_interval(w: int, d: int, l: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """(Elo, low, high): the estimate and a normal-approximation interval on the mean score.

    The per-game score variance comes from the results themselves, so draws narrow the interval;
    it takes the same pseudo-counts as the LLR, so all-draw or all-win results still get an honest
    width instead of a zero one. With no games there is nothing to estimate: (0, -inf, inf).
    """
    n = w + d + l
    if n == 0:
        return 0.0, -math.inf, math.inf
    mean = (w + 0.5 * d) / n
    _, _, var = _mean_and_variance(w + PSEUDO_COUNT, d + PSEUDO_COUNT, l + PSEUDO_COUNT)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half = z * math.sqrt(var / n)
    return elo_from_score(mean), elo_from_score(mean - half), elo_from_score(mean + half)
