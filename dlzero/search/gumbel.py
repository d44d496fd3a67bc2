"""Gumbel AlphaZero's root (Danihelka et al., ICLR 2022) as pure functions over a root's edge arrays.

Beside the PUCT rule of `dlzero.search.select`, and in its style: nothing here touches a tree.
`Search` keeps one `GumbelRoot` per tree and passes the root's arrays in.

The method, for a search with budget n at a root with prior logits l (the raw network policy,
temperature 1: the target below is learnt back into that policy, so a tempered prior would flatten
it generation after generation):

- **Gumbel-Top-k**: draw g(a) ~ Gumbel(0, 1) per legal move (g = 0 when not exploring: engine,
  gate, cheap searches) and consider the m = min(n, gumbel_considered, legal moves) moves with the
  highest g(a) + l(a).
- **Sequential Halving** spends n simulations in phases: each phase gives every remaining move
  max(1, floor(n / (ceil(log2 m) * |S|))) visits, then keeps the better half (at least 2). As in
  mctx, this is a schedule of "the visit count a move must have to be picked at simulation k";
  at each simulation the root picks, among the considered moves with exactly that many visits,
  the one with the highest g + l + sigma(q).
- **Completed Q**: a visited move's Q is its mean win rate; an unvisited move gets the mixed value
  v_mix = (v + N_sum * sum_visited(p * q) / sum_visited(p)) / (1 + N_sum), where v is the
  network's value of the root and p the prior probabilities.
- **sigma(q) = (c_visit + max_b N(b)) * c_scale * q** with q a win rate in [0, 1] (c_visit 50,
  c_scale 1 for board games, as in the paper).
- **Improved policy** pi' = softmax(l + sigma(completed Q)) over all legal moves: the training target.
- **Played move**: argmax of g + l + sigma(q) among the considered moves with the most visits
  (those the halving left).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# dlshogi-compatible hcpe3 stores a policy target as integer visit counts; pi' is written as
# round(pi' * PSEUDO_VISITS): the trainer normalises counts, so only the ratios matter, and 10 000
# keeps 1e-4 of resolution (far below a target's own noise) while every count fits in a u16.
PSEUDO_VISITS = 10_000


@dataclass(frozen=True)
class GumbelParams:
    """The constants of the completed-Q transform sigma."""

    c_visit: float = 50.0
    c_scale: float = 1.0


def considered_visit(sim: int, m: int, n: int) -> int:
    """Sequential Halving's schedule: the visits a move must have to be picked at simulation `sim`.

    `m` moves are considered and the budget is `n`. Phases as in the paper: each remaining move gets
    max(1, n // (ceil(log2 m) * remaining)) more visits, then the remaining set halves (>= 2). With
    m = 1 the one move takes every simulation. Simulations past `n` continue the last phase.
    """
    if m <= 1:
        return sim
    log2m = math.ceil(math.log2(m))
    remaining, level, start = m, 0, 0
    while True:
        extra = max(1, n // (log2m * remaining))
        length = extra * remaining
        if sim < start + length or start + length >= n:
            return level + (sim - start) // remaining
        start += length
        level += extra
        remaining = max(2, remaining // 2)


def halving_visits(m: int, n: int) -> np.ndarray:
    """Final visits of the m considered moves, best first, when the ranking never changes (for tests)."""
    visits = np.zeros(m, dtype=np.int64)
    for sim in range(n):
        want = considered_visit(sim, m, n)
        visits[int(np.nonzero(visits == want)[0][0])] += 1
    return visits


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64) - float(np.max(x))
    return x - math.log(float(np.exp(x).sum()))


def logits_from_prior(prior: np.ndarray, temperature: float) -> np.ndarray:
    """The temperature-1 log-policy of a node whose `prior` is softmax(logits / temperature).

    log prior = logits / T - const, so T * log prior is the logits up to a constant, which the
    log-softmax removes. A prior that underflowed to 0 counts as the smallest float32.
    """
    tiny = np.finfo(np.float32).tiny
    return log_softmax(temperature * np.log(np.maximum(prior.astype(np.float64), tiny)))


def top_k(scores: np.ndarray, m: int) -> np.ndarray:
    """Boolean mask of the `m` highest scores (ties to the lower index)."""
    mask = np.zeros(len(scores), dtype=bool)
    mask[np.argsort(-scores, kind="stable")[:m]] = True
    return mask


def mixed_value(raw_value: float, q: np.ndarray, n: np.ndarray, prior: np.ndarray) -> float:
    """v_mix: the network's value blended with the prior-weighted Q of the visited moves."""
    visited = n > 0
    total = float(n.sum())
    if not visited.any():
        return float(raw_value)
    p = np.maximum(prior[visited], np.finfo(np.float64).tiny)
    weighted_q = float((p * q[visited]).sum() / p.sum())
    return (float(raw_value) + total * weighted_q) / (total + 1.0)


def completed_q(n: np.ndarray, w: np.ndarray, raw_value: float, prior: np.ndarray) -> np.ndarray:
    """Q of every move: the mean win rate where visited, v_mix elsewhere."""
    q = np.divide(w, n, out=np.zeros(len(n)), where=n > 0)
    return np.where(n > 0, q, mixed_value(raw_value, q, n, prior))


def sigma(q: np.ndarray, n: np.ndarray, params: GumbelParams) -> np.ndarray:
    """sigma(q) = (c_visit + max_b N(b)) * c_scale * q."""
    return (params.c_visit + float(n.max(initial=0.0))) * params.c_scale * q


def transformed_q(logits: np.ndarray, n: np.ndarray, w: np.ndarray, raw_value: float,
                  params: GumbelParams) -> np.ndarray:
    """sigma(completed Q) for every move (the prior for v_mix is softmax(logits))."""
    return sigma(completed_q(n, w, raw_value, np.exp(logits)), n, params)


def improved_policy(logits: np.ndarray, n: np.ndarray, w: np.ndarray, raw_value: float,
                    params: GumbelParams) -> np.ndarray:
    """pi' = softmax(logits + sigma(completed Q)): the policy target of a Gumbel search."""
    return np.exp(log_softmax(logits + transformed_q(logits, n, w, raw_value, params)))


def pseudo_visits(policy: np.ndarray, scale: int = PSEUDO_VISITS) -> np.ndarray:
    """pi' as integer counts for hcpe3 (round(pi' * scale); moves rounding to 0 are left out by the writer)."""
    return np.rint(policy * scale).astype(np.int64)


def select_root(visits: np.ndarray, considered: np.ndarray, gumbel: np.ndarray, logits: np.ndarray,
                sigma_q: np.ndarray, want: int) -> int:
    """The considered move with exactly `want` visits and the highest g + logits + sigma(q).

    If none has `want` visits (a collision undid one), the least-visited considered move instead.
    """
    eligible = considered & (visits == want)
    if not eligible.any():
        least = visits[considered].min()
        eligible = considered & (visits == least)
    score = np.where(eligible, gumbel + logits + sigma_q, -np.inf)
    return int(score.argmax())


def final_choice(visits: np.ndarray, considered: np.ndarray, gumbel: np.ndarray, logits: np.ndarray,
                 sigma_q: np.ndarray) -> int:
    """The move to play: argmax g + logits + sigma(q) among the considered moves with the most visits."""
    most = visits[considered].max()
    score = np.where(considered & (visits == most), gumbel + logits + sigma_q, -np.inf)
    return int(score.argmax())


class GumbelRoot:
    """One search's Gumbel state at a root: the sample, the considered set, this search's visits.

    Visits are counted here, not read from the node, because a reused root already carries visits
    from the previous move's search and virtual loss may weigh more than 1: the schedule is about
    this search's simulations. Q and sigma use the node's full statistics (more is known).
    """

    def __init__(self, prior: np.ndarray, temperature: float, raw_value: float, budget: int, max_considered: int,
                 rng: np.random.Generator | None, params: GumbelParams) -> None:
        k = len(prior)
        self.logits = logits_from_prior(prior, temperature)
        self.raw_value = raw_value
        self.gumbel = rng.gumbel(size=k) if rng is not None else np.zeros(k)
        self.m = max(1, min(budget, max_considered, k))
        self.budget = budget
        self.considered = top_k(self.gumbel + self.logits, self.m)
        self.visits = np.zeros(k, dtype=np.int64)
        self.params = params
        self._index = np.flatnonzero(self.considered)   # ascending: ties go to the lowest index
        self._score = self.gumbel + self.logits
        self._sims = 0

    def select(self, n: np.ndarray, w: np.ndarray) -> int:
        """The root move the next simulation descends into (and count it).

        The same move as `select_root(..., transformed_q(...), want)`, computed on the eligible
        moves only, as this runs once per simulation: sigma is needed only where some eligible move
        was visited (unvisited ones share v_mix, so g + logits alone ranks them).
        """
        want = considered_visit(self._sims, self.m, self.budget)
        visits = self.visits[self._index]
        eligible = self._index[visits == want]
        if len(eligible) == 0:
            eligible = self._index[visits == visits.min()]
        base = self._score[eligible]
        ne = n[eligible]
        if len(eligible) > 1 and (ne > 0).any():
            if (ne > 0).all():
                q = w[eligible] / ne
            else:
                q = np.where(ne > 0, w[eligible] / np.maximum(ne, 1e-300),
                             mixed_value(self.raw_value, np.divide(w, n, out=np.zeros(len(n)), where=n > 0), n,
                                         np.exp(self.logits)))
            base = base + sigma(q, n, self.params)
        i = int(eligible[int(base.argmax())])
        self.visits[i] += 1
        self._sims += 1
        return i

    def undo(self, i: int) -> None:
        """A simulation through move `i` collided and was undone."""
        self.visits[i] -= 1
        self._sims -= 1

    def choice(self, n: np.ndarray, w: np.ndarray) -> int:
        """The move to play (see `final_choice`)."""
        return final_choice(self.visits, self.considered, self.gumbel, self.logits,
                            transformed_q(self.logits, n, w, self.raw_value, self.params))

    def policy(self, n: np.ndarray, w: np.ndarray) -> np.ndarray:
        """pi' over every legal move (see `improved_policy`)."""
        return improved_policy(self.logits, n, w, self.raw_value, self.params)
