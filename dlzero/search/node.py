"""Search tree nodes: one per position reached, children stored as numpy arrays.

Edge statistics live in the parent (arrays indexed by child slot `i`, `k` = number of legal moves):

| field | shape | meaning |
|---|---|---|
| moves | [k] int64 | cshogi move ints of the legal moves |
| prior | [k] float32 | P(s, a): softmax of the policy logits at the moves' labels / temperature |
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

import functools
import sys

import numpy as np

# The tree's bytes as the allocators hold them, so that `search.hash_mb` bounds the process's memory rather than
# a guess (tests/test_usi_hash.py checks them against tracemalloc and against the resident size): CPython's
# object allocator serves requests of up to 512 bytes in 16-byte steps; larger ones, numpy's buffers and an
# array's shape and strides come from the C library's malloc, which adds an 8-byte header and rounds up to 16.
_PYMALLOC_MAX = 512
_ARRAY_OBJECT = np.ndarray.__basicsize__  # an ndarray object, without its shape and strides
_LIST = sys.getsizeof([])                 # a list object (GC header included), without its item array
_FLOAT = sys.getsizeof(0.5)               # each of visits, value_sum, visited_prior, nn_value once set


def c_block(size: int) -> int:
    """Bytes glibc's malloc holds for a request of `size` bytes (at least 32)."""
    return max(32, (size + 8 + 15) & ~15)


def py_block(size: int) -> int:
    """Bytes CPython's allocator holds for a request of `size` bytes (PyObject_Malloc, PyMem_Malloc)."""
    return (size + 15) & ~15 if size <= _PYMALLOC_MAX else c_block(size)


def view_bytes() -> int:
    """A one-dimensional numpy array that shares another's data: the object, its shape and strides."""
    return py_block(_ARRAY_OBJECT) + c_block(16)


def array_bytes(nbytes: int) -> int:
    """A one-dimensional numpy array owning `nbytes` of data: the object, its shape and strides, the data."""
    return view_bytes() + c_block(max(nbytes, 1))


@functools.cache  # once per expansion, in the search's hot path: a lookup, not a dozen calls
def expansion_bytes(k: int) -> int:
    """Bytes a node gains when it is expanded with `k` legal moves: `moves`, `n` and `w` (arrays of 8-byte
    items), `prior` (a view of its batch's float32 priors, and its 4 bytes a move there), the children list's
    item array, and the floats `nn_value` and `visited_prior` (the list object and the other floats are in
    NODE_BYTES)."""
    return 3 * array_bytes(8 * k) + view_bytes() + 4 * k + py_block(8 * k) + 2 * py_block(_FLOAT)


# A node the search has gone through (one with a child): the compiled walk (`_puct.c`) reads its moves, prior, n
# and w through the buffer protocol, and numpy 2 keeps, per array read so, a description of it until the array
# dies: a 40-byte struct followed by the shape and strides, and the format string. (The walk without the
# compiled rule makes none: counted anyway, the count errs on the safe side there.)
_BUFFER_INFO = 40 + 2 * 8
PARENT_BYTES = 4 * (py_block(_BUFFER_INFO) + py_block(2))


def order_bytes(k: int) -> int:
    """Bytes of a node's `order` (an int16 array)."""
    return array_bytes(2 * k)


class Node:
    """A position in the tree; expanded once the network (or a rule) has evaluated it."""

    __slots__ = ("moves", "prior", "n", "w", "children", "visits", "value_sum",
                 "visited_prior", "terminal", "mate_plies", "pending", "nn_value", "order", "width")

    def __init__(self) -> None:
        self.moves: np.ndarray | None = None
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

    def expand(self, moves: np.ndarray, prior: np.ndarray) -> None:
        """Attach the legal moves and their priors; statistics start at zero."""
        k = len(moves)
        self.moves, self.prior = moves, prior.astype(np.float32, copy=False)
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
        """(nodes, bytes) of this subtree (iterative: trees can be deep)."""
        nodes = memory = 0
        stack = [self]
        while stack:
            node = stack.pop()
            nodes += 1
            memory += NODE_BYTES + (expansion_bytes(len(node.moves)) if node.moves is not None else 0)
            if node.order is not None:
                memory += order_bytes(len(node.order))
            children = [c for c in node.children if c is not None]
            if children:
                memory += PARENT_BYTES
            stack.extend(children)
        return nodes, memory


# A node as created: the object, its (empty) children list, and the floats its first backup makes of
# `visits` and `value_sum` (a node proven by the rules is never expanded, but is backed up).
NODE_BYTES = py_block(sys.getsizeof(Node())) + py_block(_LIST) + 2 * py_block(_FLOAT)
