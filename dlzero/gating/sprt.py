"""Sequential probability ratio test and Elo estimates for gating, on games or on colour-swapped pairs.

Gating asks "is the candidate at least `elo1` stronger, or at most `elo0`?" and should stop as soon
as the games played answer it, at error rates `alpha` (promoting a candidate no better than `elo0`)
and `beta` (rejecting one as good as `elo1`). Wald's SPRT does that with the fewest games on average.

**Units.** A match (dlzero.gating.match) plays every opening twice with colours swapped. The two games of such a pair
share an opening, so they are not independent: a lopsided opening makes both games go to whoever
holds the better side, and the pair scores 1 of 2. Counting them as two independent games (the
trinomial win/draw/loss model) overstates what was learnt. So the gate's unit is the pair: its
score is 0, 1/2, 1, 3/2 or 2 points, the pentanomial model that Fishtest uses. A unit's score X is
normalised to [0, 1] (game: 0, 1/2, 1; pair: points / 2) so both models share one formula.

**LLR** (generalised SPRT, normal approximation, as Fishtest-style testers use). Under a hypothesis
of Elo e the mean score is s(e) = 1 / (1 + 10^(-e/400)). With the sample mean x and per-unit
variance v estimated from the results, the log-likelihood of N units under mean s is, up to terms
that cancel in the ratio, -N (x - s)^2 / (2 v). Hence

    LLR = N / (2 v) * [(x - s0)^2 - (x - s1)^2] = N (s1 - s0) (2x - s0 - s1) / (2 v).

Wald's bounds: accept H1 when LLR >= ln((1 - beta) / alpha), reject (accept H0) when
LLR <= ln(beta / (1 - alpha)).

**Pseudo-counts.** A gate sees few units, often all of one kind at first, where v = 0 makes the LLR
unbounded and one result would decide. So every category gets a pseudo-count (mean 1/2, like a
Jeffreys prior): half a game per win/draw/loss, a quarter of a pair per pentanomial category. It
keeps v > 0, pulls early results slightly towards "equal" (slower to decide either way, never
faster) and is negligible once tens of units are in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

GAME_SCORES = (0.0, 0.5, 1.0)                 # loss, draw, win
PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)     # a pair's points (0, 1/2, 1, 3/2, 2) divided by 2
GAME_PSEUDO_COUNT = 0.5
PAIR_PSEUDO_COUNT = 0.25
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


def pair_category(points: float) -> int:
    """Index into the pentanomial counts of a pair that scored `points` (0, 0.5, 1, 1.5 or 2)."""
    k = round(points * 2)
    if not 0 <= k <= 4 or abs(points * 2 - k) > 1e-9:
        raise ValueError(f"a pair scores 0, 0.5, 1, 1.5 or 2 points, not {points}")
    return k


def _moments(scores: Sequence[float], counts: Sequence[float]) -> tuple[float, float, float]:
    """(units, mean score, per-unit score variance) of counts over the score categories."""
    n = sum(counts)
    mean = sum(c * x for c, x in zip(counts, scores, strict=True)) / n
    var = sum(c * (x - mean) ** 2 for c, x in zip(counts, scores, strict=True)) / n
    return n, mean, var


def _llr(scores: Sequence[float], counts: Sequence[int], pseudo: float, elo0: float, elo1: float) -> float:
    if sum(counts) == 0:
        return 0.0
    n, mean, var = _moments(scores, [c + pseudo for c in counts])
    s0, s1 = score_from_elo(elo0), score_from_elo(elo1)
    return n * (s1 - s0) * (2.0 * mean - s0 - s1) / (2.0 * var)


def _decide(value: float, alpha: float, beta: float) -> tuple[Decision, float, tuple[float, float]]:
    bounds = sprt_bounds(alpha, beta)
    if value >= bounds[1]:
        return "accept", value, bounds
    if value <= bounds[0]:
        return "reject", value, bounds
    return "continue", value, bounds


def _interval(scores: Sequence[float], counts: Sequence[int], pseudo: float,
              confidence: float) -> tuple[float, float, float]:
    n = sum(counts)
    if n == 0:
        return 0.0, -math.inf, math.inf
    _, mean, _ = _moments(scores, counts)
    _, _, var = _moments(scores, [c + pseudo for c in counts])
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    half = z * math.sqrt(var / n)
    return elo_from_score(mean), elo_from_score(mean - half), elo_from_score(mean + half)


# -- games (trinomial): for results that are not colour-swapped pairs ---------------------------------
def llr(w: int, d: int, l: int, elo0: float, elo1: float) -> float:
    """Log-likelihood ratio of H1 (Elo = elo1) against H0 (Elo = elo0) for independent games."""
    return _llr(GAME_SCORES, (l, d, w), GAME_PSEUDO_COUNT, elo0, elo1)


def sprt_decision(w: int, d: int, l: int, elo0: float, elo1: float, alpha: float, beta: float
                  ) -> tuple[Decision, float, tuple[float, float]]:
    """("accept" | "reject" | "continue", LLR, (lower, upper)) for independent games."""
    return _decide(llr(w, d, l, elo0, elo1), alpha, beta)


def truncated_verdict(w: int, d: int, l: int, bounds: tuple[float, float], alpha: float, beta: float, final: bool,
                      outcomes: tuple[str, str] = ("H1", "H0")) -> str | None:
    """The verdict of a match fixed in advance on independent games, or None to play on: H1 (at least ELO1
    stronger) or H0 (at most ELO0) once the SPRT decides; `final` (the game cap is reached): an undecided test is
    truncated and decided by the LLR's sign. `outcomes` names what H1 and H0 mean to the caller."""
    decision, value, (low, high) = sprt_decision(w, d, l, *bounds, alpha, beta)
    if decision == "accept":
        return f"H1 accepted (LLR {value:.2f} >= {high:.2f}): {outcomes[0]}"
    if decision == "reject":
        return f"H0 accepted (LLR {value:.2f} <= {low:.2f}): {outcomes[1]}"
    if final:
        return (f"truncated at {w + d + l} games, LLR {value:.2f} in ({low:.2f}, {high:.2f}): "
                + (f"positive, {outcomes[0]}" if value > 0 else f"not positive, {outcomes[1]}"))
    return None


def elo_interval(w: int, d: int, l: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """(Elo, low, high) for independent games: the estimate and a normal-approximation interval.

    The mean is the plain score; the variance takes the pseudo-counts, so all-draw or all-win
    results still get an honest width instead of a zero one. No games: (0, -inf, inf).
    """
    return _interval(GAME_SCORES, (l, d, w), GAME_PSEUDO_COUNT, confidence)


# -- colour-swapped pairs (pentanomial): what the gate decides on ------------------------------------
def pair_llr(pairs: Sequence[int], elo0: float, elo1: float) -> float:
    """LLR for pentanomial counts: `pairs[k]` pairs scored k/2 points (k = 0..4)."""
    return _llr(PAIR_SCORES, _five(pairs), PAIR_PSEUDO_COUNT, elo0, elo1)


def pair_sprt_decision(pairs: Sequence[int], elo0: float, elo1: float, alpha: float, beta: float
                       ) -> tuple[Decision, float, tuple[float, float]]:
    """("accept" | "reject" | "continue", LLR, (lower, upper)) for pentanomial counts."""
    return _decide(pair_llr(pairs, elo0, elo1), alpha, beta)


def pair_elo_interval(pairs: Sequence[int], confidence: float = 0.95) -> tuple[float, float, float]:
    """(Elo, low, high) from pentanomial counts: per-game score = mean pair points / 2, and the
    interval from the variance between pairs (so a pair's two games count as one observation)."""
    return _interval(PAIR_SCORES, _five(pairs), PAIR_PSEUDO_COUNT, confidence)


def _five(pairs: Sequence[int]) -> Sequence[int]:
    if len(pairs) != 5:
        raise ValueError(f"pentanomial counts have 5 entries (pairs scoring 0 .. 2 points), got {len(pairs)}")
    return pairs
