"""A node of a searched tree as its readers see it: a position in a `dlzero.search.arena.Arena`.

The search works on the arena's indices; everything that reads a result (move statistics, the principal
variation, the policy target, the Gumbel root, the mate guard, tree reuse) goes through `Node`, which keeps
the names of the object tree the arena replaced. Edge statistics are arrays indexed by child slot `i`
(`k` = number of legal moves), made on each read (copies: the arena's arrays move when they grow):

| field | shape | meaning |
|---|---|---|
| moves | [k] int64 | cshogi move ints of the legal moves |
| prior | [k] float32 | P(s, a): softmax of the policy logits at the moves' labels / temperature |
| n | [k] float64 | N(s, a): visits, virtual loss included while in flight |
| w | [k] float64 | W(s, a): summed win rate of the move for the player choosing it |

Values are win rates in [0, 1]; `w[i] / n[i]` is Q(s, a) from the chooser's point of view.
`terminal` holds a proven result for the side to move here (1 win, 0 loss, draw value for draws),
set by the rules (mate, repetition, declaration) or by a mate search. `mate_plies` says whether that
proof is a mate: plies to the mate from here (0: the side to move is mated, k: it mates in k), None
for every other proof (repetition, perpetual check, move cap, declaration) or no proof.
"""

from __future__ import annotations

import numpy as np

from dlzero.search.arena import Arena

__all__ = ["Node"]


class Node:
    """Node `index` of `arena`. Two views of one node compare equal."""

    __slots__ = ("arena", "index")

    def __init__(self, arena: Arena, index: int) -> None:
        self.arena = arena
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and other.arena is self.arena and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.arena), self.index))

    def __repr__(self) -> str:
        return f"Node({self.index}, visits={self.visits}, moves={self.arena.count(self.index)})"

    @property
    def expanded(self) -> bool:
        return self.arena.expanded(self.index)

    @property
    def moves(self) -> np.ndarray:
        return self.arena.moves(self.index)

    @property
    def prior(self) -> np.ndarray:
        return self.arena.prior(self.index)

    @prior.setter
    def prior(self, prior: np.ndarray) -> None:
        self.arena.set_prior(self.index, prior)

    @property
    def n(self) -> np.ndarray:
        return self.arena.edge_n(self.index)

    @property
    def w(self) -> np.ndarray:
        return self.arena.edge_w(self.index)

    @property
    def visits(self) -> float:
        return self.arena.visits(self.index)

    @property
    def value_sum(self) -> float:
        return self.arena.value_sum(self.index)

    @property
    def nn_value(self) -> float | None:
        return self.arena.nn_value(self.index)

    @property
    def terminal(self) -> float | None:
        return self.arena.terminal(self.index)

    @property
    def mate_plies(self) -> int | None:
        return self.arena.mate_plies(self.index)

    def prove(self, terminal: float | None, mate_plies: int | None = None) -> None:
        """Set (or, with None, clear) the proven result and its mate length."""
        self.arena.set_proof(self.index, terminal, mate_plies)

    def child(self, i: int) -> Node | None:
        """The child below move `i`, or None where no search went."""
        c = self.arena.child(self.index, i)
        return Node(self.arena, c) if c >= 0 else None

    @property
    def children(self) -> list[Node | None]:
        """Every child (`child(i)` reads one)."""
        return [Node(self.arena, int(c)) if c >= 0 else None for c in self.arena.children(self.index)]

    def q(self) -> float:
        """Mean win rate of this node for its side to move (0.5 before any visit)."""
        visits = self.visits
        return self.value_sum / visits if visits > 0 else 0.5

    def child_index(self, move: int) -> int:
        """Slot of `move` among the children, or -1."""
        hit = np.nonzero(self.moves == move)[0]
        return int(hit[0]) if hit.size else -1

    def size(self) -> tuple[int, int]:
        """(nodes, bytes) of this subtree."""
        return self.arena.subtree_size(self.index)
