"""The selection rule as a pure function over one node's edge arrays (as mctx passes its rules in).

dlshogi's PUCT: for each move a,

    score(a) = Q(a) + c(N) * P(a) * sqrt(N) / (1 + n(a)),   c(N) = c_init + ln((N + c_base + 1) / c_base)

where N is the parent's visit count (sqrt(N) is taken as 1 before the first visit, so the priors
decide the first descent), n(a) the move's visits, Q(a) = W(a) / n(a) its mean win rate for the
player choosing it, and for a move not yet visited Q is the first-play urgency
FPU = max(0, Q_parent - fpu_reduction * sqrt(sum of priors of the visited moves)), with
Q_parent = 0.5 before any visit. Ties go to the lowest index (numpy argmax).

The compiled tree walk (`_puct.c`, `arena_descend`) scores nodes with the same operations in the same order,
so both choose alike (tests/test_search_arena.py grows one tree each way and compares every field). Nothing
here touches a tree: `Search` passes a node's arrays in and applies the chosen index, so the rule can be tested
on hand-made arrays and swapped (the Gumbel root) without the bookkeeping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PuctParams:
    """The constants of one PUCT variant (the root and the rest of the tree have their own)."""

    c_init: float
    c_base: float
    fpu_reduction: float


def exploration_constant(parent_visits: float, params: PuctParams) -> float:
    """c(N) = c_init + ln((N + c_base + 1) / c_base): exploration grows slowly with the visits."""
    return params.c_init + math.log((parent_visits + params.c_base + 1.0) / params.c_base)


def first_play_urgency(parent_visits: float, parent_value_sum: float, visited_prior: float,
                       params: PuctParams) -> float:
    """The Q an unvisited move is scored with: the parent's mean, reduced by the prior mass tried."""
    parent_q = parent_value_sum / parent_visits if parent_visits > 0 else 0.5
    return max(0.0, parent_q - params.fpu_reduction * math.sqrt(visited_prior))


def puct_scores(prior: np.ndarray, n: np.ndarray, w: np.ndarray, parent_visits: float, parent_value_sum: float,
                visited_prior: float, params: PuctParams) -> np.ndarray:
    """PUCT score of every move (float64 array); the arrays are read, never written."""
    c = exploration_constant(parent_visits, params)
    sqrt_total = math.sqrt(parent_visits) if parent_visits > 0 else 1.0
    fpu = first_play_urgency(parent_visits, parent_value_sum, visited_prior, params)
    q = np.empty_like(n, dtype=np.float64)  # (np.full is a Python wrapper: a third of this function's time)
    q.fill(fpu)
    np.divide(w, n, out=q, where=n > 0)
    u = np.multiply(prior, c * sqrt_total, dtype=np.float64)  # in float64 whatever the priors' dtype
    u /= 1.0 + n
    q += u
    return q


def puct_select(prior: np.ndarray, n: np.ndarray, w: np.ndarray, parent_visits: float, parent_value_sum: float,
                visited_prior: float, params: PuctParams) -> int:
    """Index of the move with the highest PUCT score (the lowest index among equals)."""
    return int(puct_scores(prior, n, w, parent_visits, parent_value_sum, visited_prior, params).argmax())
