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

What the games can say (`fit_connected`, what `dlzero rate` and scripts/ladder.py report): a pairing
that one side swept (20-0, or 0-20) says only "far apart", not how far; its Elo gap is +infinity at the
maximum and whatever the prior makes it with one. A pairing is *informative* when its score is strictly
between 0 and 1 (each side took at least a draw). Players joined by a chain of informative pairings form
a component, inside which the plain maximum likelihood is finite (every split of a component into two
groups has points scored both ways: Ford's condition for a Bradley-Terry maximum), so the prior only
nudges it. Each component is fitted on its own games with one member at 0 (the pin where it is in it),
and an Elo is always printed with its prior and its zero (`scale_label`). A player in no informative
pairing gets no Elo at all: its raw W-D-L says what is known. The rule is conservative: a cycle of sweeps
(a beat b, b beat c, c beat a, all 20-0) also has a finite maximum but is left split.

Scores come first in every table: per pairing W-D-L, the score (draws as half a point) and its Wilson
interval (`score_interval`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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


def score_interval(wins: int, draws: int, losses: int, confidence: float = 0.95) -> tuple[float, float, float]:
    """(score, low, high): the points per game (draws as half a point) and its Wilson score interval.

    Why Wilson: it stays inside [0, 1] and is not zero-width at a sweep (20-0: [0.839, 1]), where the
    plain normal interval says "exactly 1". It treats a game as a win or a loss; draws make a game's
    real variance, (w + d/4) / n - s^2, smaller than s (1 - s), so with draws the interval is slightly
    wide (conservative), never too narrow. Games are taken as independent (colour-swapped pairs share
    an opening, which `dlzero.gating.sprt`'s pentanomial interval accounts for in the gate). No games:
    (0.5, 0, 1).
    """
    n = wins + draws + losses
    if n == 0:
        return 0.5, 0.0, 1.0
    s = (wins + 0.5 * draws) / n
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    centre = (s + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(s * (1 - s) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return s, max(0.0, min(s, centre - half)), min(1.0, max(s, centre + half))  # rounding: s stays inside


@dataclass(frozen=True)
class Pairing:
    """Every game between two players, counted from `player`'s side."""

    player: str
    opponent: str
    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return score_interval(self.wins, self.draws, self.losses)[0]

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The score's Wilson interval (`score_interval`)."""
        return score_interval(self.wins, self.draws, self.losses, confidence)[1:]

    @property
    def informative(self) -> bool:
        """Whether the score is strictly between 0 and 1: each side took a win or a draw (not a sweep)."""
        return self.wins + self.draws > 0 and self.losses + self.draws > 0

    @property
    def wdl(self) -> str:
        return f"{self.wins}-{self.draws}-{self.losses}"


@dataclass(frozen=True)
class Rating:
    """A player's fitted rating (Elo, relative to `reference`, the player at 0 of its scale) with its
    confidence interval."""

    player: str
    elo: float
    elo_low: float
    elo_high: float
    games: int  # the games its fit used (`fit_connected`: those inside its component)
    score: float  # points per game over those games (no virtual draws)
    reference: str


@dataclass
class RatingList:
    """The fit: ratings (a component at a time, best first) and the players it could not rate
    (`fit_ratings`: not connected to the pin; `fit_connected`: in no informative pairing), the prior it
    used and every pairing's games."""

    ratings: list[Rating]
    unrated: list[str]
    pin: str
    prior_draws: float = DEFAULT_PRIOR_DRAWS
    pairings: list[Pairing] = field(default_factory=list)

    def by_player(self) -> dict[str, Rating]:
        return {r.player: r for r in self.ratings}

    def label(self, reference: str) -> str:
        """What an Elo of the scale with `reference` at 0 is (`scale_label`)."""
        return scale_label(reference, self.prior_draws)

    def record(self, player: str) -> tuple[int, int, int]:
        """`player`'s wins, draws and losses over all its games."""
        w = d = lo = 0
        for p in self.pairings:
            if player in (p.player, p.opponent):
                mine = (p.wins, p.losses) if p.player == player else (p.losses, p.wins)
                w, d, lo = w + mine[0], d + p.draws, lo + mine[1]
        return w, d, lo


def scale_label(reference: str, prior_draws: float | None) -> str:
    """How an Elo figure is named wherever it is printed or written: its prior and its zero, e.g.
    "Elo (1 virtual draw per pairing, random = 0)". `prior_draws` None: a file from before it was kept."""
    if prior_draws is None:
        prior = "prior not recorded"
    elif prior_draws == 0:
        prior = "no prior"
    else:
        prior = f"{prior_draws:g} virtual draw{'' if prior_draws == 1 else 's'} per pairing"
    return f"Elo ({prior}, {reference} = 0)"


def main_reference(references: Iterable[str], pin: str = "random") -> str | None:
    """The zero most of `references` (one per rated model) are measured from, for a chart with one axis:
    the most frequent, the pin on a tie, then the first name. None when there are none."""
    counts = Counter(references)
    if not counts:
        return None
    return min(counts, key=lambda ref: (-counts[ref], ref != pin, ref))


def _ranks(order: Sequence[str]) -> dict[str, int]:
    """Each player's place in `order` (its first, where it is named twice)."""
    rank: dict[str, int] = {}
    for i, p in enumerate(order):
        rank.setdefault(p, i)
    return rank


def tally_pairings(games: Iterable[GameResult], order: Sequence[str] = ()) -> list[Pairing]:
    """One `Pairing` per pair of players that met. `order`: players weakest first (anchors, rungs); the
    pairing is counted from the side later in it (a player not in it counts as after all of it, ties by
    name), so a model's pairing with an anchor is the model's. Sorted by that side, then its opponent."""
    rank = _ranks(order)

    def key(p: str) -> tuple[int, str]:
        return rank.get(p, len(rank)), p

    cells: dict[tuple[str, str], list[int]] = {}
    for g in games:
        if g.player_a == g.player_b:
            raise RatingFitError(f"a game of '{g.player_a}' against itself cannot be rated")
        a, b, s = (g.player_a, g.player_b, g.score_a)
        if key(a) < key(b):
            a, b, s = b, a, 1.0 - s
        if s not in (0.0, 0.5, 1.0):
            raise RatingFitError(f"score {g.score_a!r} of {g.player_a} vs {g.player_b} is not 0, 1/2 or 1")
        cells.setdefault((a, b), [0, 0, 0])[{1.0: 0, 0.5: 1, 0.0: 2}[s]] += 1
    out = [Pairing(a, b, *wdl) for (a, b), wdl in cells.items()]
    out.sort(key=lambda p: (key(p.player), key(p.opponent)))
    return out


def informative_components(games: Iterable[GameResult]) -> list[list[str]]:
    """The players split by chains of informative pairings (score strictly between 0 and 1; see the
    module docstring): each component sorted by name, the components largest first, then by their first
    name. A player whose every pairing was a sweep is a component of its own."""
    pairings = tally_pairings(games)
    parent: dict[str, str] = {}

    def root(p: str) -> str:
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    for p in pairings:
        parent.setdefault(p.player, p.player)
        parent.setdefault(p.opponent, p.opponent)
    for p in pairings:
        if p.informative:
            a, b = sorted((root(p.player), root(p.opponent)))
            parent[b] = a
    groups: dict[str, list[str]] = {}
    for player in sorted(parent):
        groups.setdefault(root(player), []).append(player)
    return sorted(groups.values(), key=lambda c: (-len(c), c[0]))


def fit_connected(games: Iterable[GameResult], pin: str = "random", prior_draws: float = DEFAULT_PRIOR_DRAWS,
                  confidence: float = 0.95, order: Sequence[str] = ()) -> RatingList:
    """Ratings only where the games connect players through informative pairings (module docstring).

    Each component of two or more players is fitted on the games inside it with one member at 0: the
    pin where it is in the component, else the first of `order` (the anchors or rungs, weakest first)
    in it, else its first name. Games between components (sweeps, by definition) only bound the gaps,
    so they are left out of every fit. Players of no informative pairing are `unrated`. Ratings come a
    component at a time (the pin's first, then by their zero's place in `order`), best first in each.
    """
    games = list(games)
    rank = _ranks(order)
    blocks = []
    unrated: list[str] = []
    for members in informative_components(games):
        if len(members) == 1:
            unrated += members
            continue
        inside = set(members)
        reference = pin if pin in inside else min(members, key=lambda p: (rank.get(p, len(rank)), p))
        fit = fit_ratings([g for g in games if g.player_a in inside and g.player_b in inside], reference,
                          prior_draws, confidence)
        blocks.append(((reference != pin, rank.get(reference, len(rank)), reference), fit.ratings))
    ratings = [r for _, block in sorted(blocks, key=lambda b: b[0]) for r in block]
    return RatingList(ratings, sorted(unrated), pin, prior_draws, tally_pairings(games, order))


def report_lines(fit: RatingList) -> list[str]:
    """A rating list as a plain-text table, what is known first: every pairing's W-D-L, score and its
    95 % Wilson interval (sweeps marked), then each component's Elo under its `scale_label`, then the
    players of no informative pairing with their W-D-L and no Elo."""
    names = [p.player for p in fit.pairings] + [p.opponent for p in fit.pairings]
    w = max([len(n) for n in names] + [16])
    lines = [f"{'player':<{w}} {'opponent':<{w}} {'W-D-L':>9} {'score':>6}  95% interval (Wilson)"]
    for p in fit.pairings:
        low, high = p.interval()
        lines.append(f"{p.player:<{w}} {p.opponent:<{w}} {p.wdl:>9} {p.score:>6.3f}  [{low:.3f}, {high:.3f}]"
                     + ("" if p.informative else "  sweep: no Elo from this pairing"))
    reference = None
    for r in fit.ratings:
        if r.reference != reference:
            reference = r.reference
            note = "" if reference == fit.pin else f" (not connected to {fit.pin} by informative pairings)"
            lines += ["", fit.label(reference) + note,
                      f"{'player':<{w}} {'elo':>7}   {'95% interval':<17} {'games':>6} {'score':>6}"]
        interval = "(pinned)" if r.player == reference else f"[{r.elo_low:+.0f}, {r.elo_high:+.0f}]"
        lines.append(f"{r.player:<{w}} {r.elo:>+7.0f}   {interval:<17} {r.games:>6} {r.score:>6.3f}")
    if fit.unrated:
        lines += ["", "not connected (sweeps only): no Elo", f"{'player':<{w}} {'W-D-L':>9}"]
        lines += [f"{p:<{w}} {'-'.join(map(str, fit.record(p))):>9}" for p in fit.unrated]
    return lines


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
                              float(points[i] / played[i]), pin))
    ratings.sort(key=lambda r: (-r.elo, r.player))
    return RatingList(ratings, unrated, pin, prior_draws, tally_pairings(games))


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
