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

# Memory of a node, from sys.getsizeof and checked against tracemalloc (tests/test_usi_hash.py):
# the Node object and its empty children list; once expanded, five numpy array headers plus, per
# legal move, moves int64 + labels int32 + prior float32 + n, w float64 + a children slot.
NODE_BYTES = 200
EXPANDED_BYTES = 600
PER_MOVE_BYTES = 44
ORDER_BYTES = 112


def expansion_bytes(k: int) -> int:
    """Bytes a node gains when it is expanded with `k` legal moves."""
    return EXPANDED_BYTES + PER_MOVE_BYTES * k


def order_bytes(k: int) -> int:
    """Bytes of a node's `order` (int16 per move and an array header)."""
    return ORDER_BYTES + 2 * k


class Node:
    """A position in the tree; expanded once the network (or a rule) has evaluated it."""

    __slots__ = ("moves", "labels", "prior", "n", "w", "children", "visits", "value_sum",
                 "visited_prior", "terminal", "mate_plies", "pending", "nn_value", "order", "width")

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
        # only where the compiled rule is not built: moves by prior (select.prior_order), made at the first
        # selection here (at the root again after root noise), and the length of a prefix of it that holds
        # every move chosen so far (see select.puct_select_prefix and Search._select)
        self.order: np.ndarray | None = None
        self.width = 0

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
        return self.size()[0]

    def size(self) -> tuple[int, int]:
        """(nodes, estimated bytes) of this subtree (iterative: trees can be deep)."""
        nodes = memory = 0
        stack = [self]
        while stack:
            node = stack.pop()
            nodes += 1
            memory += NODE_BYTES + (expansion_bytes(len(node.moves)) if node.moves is not None else 0)
            if node.order is not None:
                memory += order_bytes(len(node.order))
            stack.extend(c for c in node.children if c is not None)
        return nodes, memory
