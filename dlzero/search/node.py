"""Search tree nodes: one per position reached, children stored as numpy arrays.

Edge statistics live in the parent (arrays indexed by child slot `i`, `k` = number of legal moves):

| field | shape | meaning |
|---|---|---|
| moves | [k] int64 | cshogi move ints of the legal moves |
| labels | [k] int32 | their policy labels |
| prior | [k] float32 | P(s, a): softmax of the policy logits at `labels` / temperature |
| n | [k] float64 | N(s, a): visits, virtual loss included while in flight |
| w | [k] float64 | W(s, a): summed win rate of the move for the player choosing it |
| children | [k] Node or None | child nodes, created when first reached |

Values are win rates in [0, 1]; `w[i] / n[i]` is Q(s, a) from the chooser's point of view.
`terminal` holds a proven result for the side to move here (1 win, 0 loss, draw value for draws),
set by the rules (mate, repetition, declaration) or by a mate search. `mate_plies` says whether that
proof is a mate: plies to the mate from here (0: the side to move is mated, k: it mates in k), None
for every other proof (repetition, perpetual check, move cap, declaration) or no proof.
"""

from __future__ import annotations

import numpy as np


class Node:
    """A position in the tree; expanded once the network (or a rule) has evaluated it."""

    __slots__ = ("moves", "labels", "prior", "n", "w", "children", "visits", "value_sum",
                 "visited_prior", "terminal", "mate_plies", "pending", "nn_value")

    def __init__(self) -> None:
        self.moves: np.ndarray | None = None
        self.labels: np.ndarray | None = None
        self.prior: np.ndarray | None = None
        self.n: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.children: list[Node | None] = []
        self.visits = 0.0          # N(s): visits through this node, virtual loss included
        self.value_sum = 0.0       # summed win rate for the side to move here
        self.visited_prior = 0.0   # sum of priors of children visited at least once (for FPU)
        self.terminal: float | None = None
        self.mate_plies: int | None = None
        self.pending = False       # queued for evaluation in the current batch
        self.nn_value: float | None = None

    @property
    def expanded(self) -> bool:
        return self.moves is not None

    def expand(self, moves: np.ndarray, labels: np.ndarray, prior: np.ndarray) -> None:
        """Attach the legal moves and their priors; statistics start at zero."""
        k = len(moves)
        self.moves, self.labels, self.prior = moves, labels, prior.astype(np.float32, copy=False)
        self.n = np.zeros(k, dtype=np.float64)
        self.w = np.zeros(k, dtype=np.float64)
        self.children = [None] * k

    def q(self) -> float:
        """Mean win rate of this node for its side to move (0.5 before any visit)."""
        return self.value_sum / self.visits if self.visits > 0 else 0.5

    def child_index(self, move: int) -> int:
        """Slot of `move` among the children, or -1."""
        if self.moves is None:
            return -1
        hit = np.nonzero(self.moves == move)[0]
        return int(hit[0]) if hit.size else -1

    def count_nodes(self) -> int:
        """Nodes in this subtree (iterative: trees can be deep)."""
        total, stack = 0, [self]
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(c for c in node.children if c is not None)
        return total
