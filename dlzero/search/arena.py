"""A search tree's nodes and edges in two flat arrays (dlshogi's node/child layout, mctx's array tree).

Why: a tree of Python objects with four numpy arrays a node held 2-3 KB a node (the arrays' headers,
8-byte moves and counts for every legal move) and had to be walked through Python attributes. Here a
node is one 72-byte record and a legal move one 12-byte record, both in arrays that grow by half again
(pages never written are not resident: `_records`), so `search.hash_mb` counts exactly what the tree holds, and the
compiled walk (`_puct.c`: `arena_descend`, `arena_expand`, `arena_settle`, `arena_backup`, `arena_subtree_size`,
`arena_compact`) reads plain C structs.

Layout (numpy structured dtypes with C alignment; `_puct.c` declares the same structs and the import
checks the offsets, falling back to the numpy code below if they differ):

| node field | type | meaning |
|---|---|---|
| visits | f8 | N(s): visits through this node, virtual loss included |
| value_sum | f8 | summed win rate for the side to move here |
| in_n | f8 | N(s, a) of the edge into this node (the parent's count: virtual loss while a leaf waits) |
| in_w | f8 | W(s, a) of that edge: summed win rate for the parent's side to move |
| visited_prior | f8 | sum of the priors of the children visited at least once (FPU) |
| nn_value | f8 | the network's win rate here (NaN: none) |
| terminal | f8 | a proven result for the side to move (1 win, 0 loss, the draw value; NaN: none) |
| first | i4 | index of the first edge (-1: not expanded) |
| count | i2 | number of edges (legal moves) |
| mate_plies | i2 | plies to the mate of a proof that is a mate (-1: none) |
| pending | u1 | queued for the network in the current batch |

| edge field | type | meaning |
|---|---|---|
| move | i4 | the cshogi move |
| prior | f4 | P(s, a) |
| child | i4 | the child's node index (-1: not reached yet) |

An edge's N and W live in its child (`in_n`, `in_w`; 0 while there is none), so a move no search went
into costs 12 bytes. The arithmetic is that of the object tree it replaces, operation for operation, so a
search gives the same visits bit for bit.

A path (one descent) is a flat list `[node, slot, node, slot, ...]` from the root down: the node left and
the slot of the edge taken there.
"""

from __future__ import annotations

import math
import mmap

import cshogi
import numpy as np

from dlzero.search.select import PuctParams, puct_select

NODE_DTYPE = np.dtype([("visits", "f8"), ("value_sum", "f8"), ("in_n", "f8"), ("in_w", "f8"),
                       ("visited_prior", "f8"), ("nn_value", "f8"), ("terminal", "f8"), ("first", "i4"),
                       ("count", "i2"), ("mate_plies", "i2"), ("pending", "u1")], align=True)
EDGE_DTYPE = np.dtype([("move", "i4"), ("prior", "f4"), ("child", "i4")], align=True)
# a fresh node: no visits, no network value, no proof, not expanded
_BLANK = np.array([(0.0, 0.0, 0.0, 0.0, 0.0, math.nan, math.nan, -1, 0, -1, 0)], dtype=NODE_DTYPE)[0]
_FIRST_NODES, _FIRST_EDGES = 16, 256
_MAP_BYTES = 1 << 20  # arrays from this size up have a memory map of their own (`_records`)

try:  # the walk, backup and compaction compiled (dlzero/search/_puct.c); absent where no C compiler was found
    from dlzero.search import _puct as _c
    COMPILED = (_c.arena_layout() == (NODE_DTYPE.itemsize, EDGE_DTYPE.itemsize,
                                      tuple(NODE_DTYPE.fields[f][1] for f in NODE_DTYPE.names),
                                      tuple(EDGE_DTYPE.fields[f][1] for f in EDGE_DTYPE.names)))
except (ImportError, AttributeError):
    _c = None
    COMPILED = False

__all__ = ["COMPILED", "EDGE_DTYPE", "NODE_DTYPE", "Arena"]


def _none_if_nan(x: float) -> float | None:
    return None if x != x else x


def _records(count: int, dtype: np.dtype) -> np.ndarray:
    """An uninitialised array of `count` records; from a memory map of its own when it is large.

    Why a map: the arrays grow by copying into larger ones, and glibc serves blocks below its mmap threshold
    from the heap, which the network's freed temporaries raise to as much as 32 MiB: each old array then
    left a hole in the heap, resident until trimmed (a search grew the process by 2.5x its tree's bytes).
    `ndarray.resize` reallocates in place but zero-fills the new part, making the whole capacity resident
    (1.30x of USI_Hash at 64 MiB). A map of its own is returned to the system when the array dies, and its
    pages are resident only once written."""
    nbytes = count * dtype.itemsize
    if nbytes < _MAP_BYTES:
        return np.empty(count, dtype=dtype)
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=dtype, count=count)


def _grown(records: np.ndarray, used: int, need: int) -> np.ndarray:
    """A larger array holding `records`' first `used` records: by half again, at least `need`."""
    out = _records(max(need, len(records) * 3 // 2), records.dtype)
    out[:used] = records[:used]
    return out


class Arena:
    """The nodes and edges of one tree. Node 0 is made with the arena (a tree's first root)."""

    __slots__ = ("nodes", "edges", "n_nodes", "n_edges", "compiled")

    def __init__(self, compiled: bool | None = None) -> None:
        self.nodes = np.empty(_FIRST_NODES, dtype=NODE_DTYPE)
        self.edges = np.empty(_FIRST_EDGES, dtype=EDGE_DTYPE)
        self.n_nodes = self.n_edges = 0
        self.compiled = COMPILED if compiled is None else compiled and COMPILED
        self.new_node()

    # -- size -------------------------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        """Bytes of the records in use (the budget's figure: capacity beyond it is never written)."""
        return self.n_nodes * NODE_DTYPE.itemsize + self.n_edges * EDGE_DTYPE.itemsize

    def _reserve(self, nodes: int, edges: int) -> None:
        """Room for `nodes` more nodes and `edges` more edges (growing by half again)."""
        if self.n_nodes + nodes > len(self.nodes):
            self.nodes = _grown(self.nodes, self.n_nodes, self.n_nodes + nodes)
        if self.n_edges + edges > len(self.edges):
            self.edges = _grown(self.edges, self.n_edges, self.n_edges + edges)

    def _edge_room(self, moves: np.ndarray, prior: np.ndarray) -> bool:
        """Room for len(moves) more edges (growing by half again); True when the compiled expansion takes these
        arrays (int64 moves, float32 priors: what the search passes), False for the numpy path."""
        k = len(moves)
        if self.n_edges + k > len(self.edges):
            self.edges = _grown(self.edges, self.n_edges, self.n_edges + k)
        return self.compiled and moves.dtype == np.int64 and prior.dtype == np.float32

    def new_node(self) -> int:
        """A fresh node's index."""
        self._reserve(1, 0)
        i = self.n_nodes
        self.nodes[i] = _BLANK
        self.n_nodes += 1
        return i

    # -- one node ---------------------------------------------------------------------------------
    def expanded(self, i: int) -> bool:
        return int(self.nodes["first"][i]) >= 0

    def count(self, i: int) -> int:
        return int(self.nodes["count"][i])

    def expand(self, i: int, moves: np.ndarray, prior: np.ndarray) -> None:
        """Attach the legal moves and their priors to node `i`; their statistics start at zero."""
        if self._edge_room(moves, prior):
            # numpy's three field writes and two node fields cost ~3.5 us, a third of a null-network simulation
            self.n_edges = _c.arena_expand(self.nodes, self.edges, self.n_edges, i, moves, prior)
            return
        k = len(moves)
        first = self.n_edges
        block = self.edges[first:first + k]
        block["move"] = moves
        block["prior"] = prior
        block["child"] = -1
        self.n_edges += k
        self.nodes["first"][i] = first
        self.nodes["count"][i] = k

    def settle(self, i: int, moves: np.ndarray, prior: np.ndarray, value: float, path: list[int],
               correction: float) -> None:
        """A leaf's network result at once, as `set_pending(i, False)`, `set_nn_value(i, value)`, `expand(i, moves,
        prior)` and `backup(path, i, value, correction)` write it: one compiled call for the search's every new leaf
        (those four in Python cost ~1 us more a simulation)."""
        if self._edge_room(moves, prior):
            self.n_edges = _c.arena_settle(self.nodes, self.edges, self.n_edges, i, moves, prior, float(value), path,
                                           float(correction))
            return
        self.set_pending(i, False)
        self.set_nn_value(i, value)
        self.expand(i, moves, prior)
        self.backup(path, i, value, correction)

    def terminal(self, i: int) -> float | None:
        return _none_if_nan(float(self.nodes["terminal"][i]))

    def mate_plies(self, i: int) -> int | None:
        plies = int(self.nodes["mate_plies"][i])
        return None if plies < 0 else plies

    def set_proof(self, i: int, terminal: float | None, mate_plies: int | None) -> None:
        """Node `i`'s proven result (None: none) and, for a mate, its length in plies."""
        self.nodes["terminal"][i] = math.nan if terminal is None else terminal
        self.nodes["mate_plies"][i] = -1 if mate_plies is None else mate_plies

    def nn_value(self, i: int) -> float | None:
        return _none_if_nan(float(self.nodes["nn_value"][i]))

    def set_nn_value(self, i: int, value: float) -> None:
        self.nodes["nn_value"][i] = value

    def pending(self, i: int) -> bool:
        return bool(self.nodes["pending"][i])

    def set_pending(self, i: int, pending: bool) -> None:
        self.nodes["pending"][i] = pending

    def visits(self, i: int) -> float:
        return float(self.nodes["visits"][i])

    def value_sum(self, i: int) -> float:
        return float(self.nodes["value_sum"][i])

    def visited_prior(self, i: int) -> float:
        return float(self.nodes["visited_prior"][i])

    # -- a node's edges (copies: the arrays move when they grow) -----------------------------------
    def _block(self, i: int) -> np.ndarray:
        first = int(self.nodes["first"][i])
        return self.edges[first:first + int(self.nodes["count"][i])] if first >= 0 else self.edges[:0]

    def moves(self, i: int) -> np.ndarray:
        return self._block(i)["move"].astype(np.int64)

    def prior(self, i: int) -> np.ndarray:
        return self._block(i)["prior"].copy()

    def set_prior(self, i: int, prior: np.ndarray) -> None:
        self._block(i)["prior"] = prior

    def children(self, i: int) -> np.ndarray:
        """Child node indices of node `i`'s moves (-1: not reached)."""
        return self._block(i)["child"].copy()

    def child(self, i: int, slot: int) -> int:
        return int(self.edges["child"][int(self.nodes["first"][i]) + slot])

    def edge_n(self, i: int) -> np.ndarray:
        """N(s, a) of node `i`'s moves (float64; 0 for a move not reached)."""
        return self._edge_field(i, "in_n")

    def edge_w(self, i: int) -> np.ndarray:
        """W(s, a) of node `i`'s moves (float64; 0 for a move not reached)."""
        return self._edge_field(i, "in_w")

    def _edge_field(self, i: int, name: str) -> np.ndarray:
        child = self._block(i)["child"]
        out = np.zeros(len(child), dtype=np.float64)
        reached = child >= 0
        out[reached] = self.nodes[name][child[reached]]
        return out

    def make_child(self, i: int, slot: int) -> int:
        """The child below move `slot` of node `i`, created if there is none yet."""
        e = int(self.nodes["first"][i]) + slot
        c = int(self.edges["child"][e])
        if c < 0:
            c = self.new_node()
            self.edges["child"][e] = c
        return c

    # -- the search's walk ------------------------------------------------------------------------
    def step(self, i: int, slot: int, virtual_loss: float, board: cshogi.Board, path: list[int]) -> tuple[int, int]:
        """Go down move `slot` of node `i`: visited prior on a first visit, virtual loss on the edge and the
        node, the path, the child (created if new), the board's move. Returns (child, nodes created)."""
        nodes, e = self.nodes, int(self.nodes["first"][i]) + slot
        c = int(self.edges["child"][e])
        if c < 0 or nodes["in_n"][c] == 0:
            nodes["visited_prior"][i] += float(self.edges["prior"][e])
        created = 0
        if c < 0:
            c = self.new_node()
            self.edges["child"][e] = c
            created = 1
        nodes = self.nodes  # (new_node may have moved the array)
        nodes["in_n"][c] += virtual_loss
        nodes["visits"][i] += virtual_loss
        path += (i, slot)
        try:
            board.push(int(self.edges["move"][e]))
        except BaseException:
            # as the compiled walk: this level leaves the path (the caller pops the board once per level in it)
            # and a node made here is unmade; its virtual loss stays (a board that refuses a move ends the search)
            del path[-2:]
            if created:
                self.edges["child"][e] = -1
                self.n_nodes -= 1
            raise
        return c, created

    def descend(self, i: int, board: cshogi.Board, path: list[int], root_params: tuple[float, float, float] | None,
                params: tuple[float, float, float], virtual_loss: float) -> tuple[int, int]:
        """From node `i` down through expanded, unproven nodes by the PUCT rule (`root_params` at `i` itself, None
        for `params` there too), adding virtual loss, extending `path` and pushing the moves on `board`; returns
        (the first node that is proven or not expanded, nodes created: 0 or 1)."""
        self._reserve(1, 0)  # a walk creates one node at most: the compiled walk needs the room made here
        if self.compiled:
            leaf, created = _c.arena_descend(self.nodes, self.edges, self.n_nodes, i, board, path, root_params,
                                             params, float(virtual_loss))
            self.n_nodes += created
            return leaf, created
        created = 0
        here = root_params if root_params is not None else params
        while self.nodes["terminal"][i] != self.nodes["terminal"][i] and self.nodes["first"][i] >= 0:
            i, made = self.step(i, self.select(i, here), virtual_loss, board, path)
            created += made
            here = params
        return i, created

    def select(self, i: int, params: tuple[float, float, float]) -> int:
        """dlshogi's PUCT at node `i` (`dlzero.search.select.puct_scores`' arithmetic; the lowest index of equals)."""
        node = self.nodes[i]
        return puct_select(self.prior(i), self.edge_n(i), self.edge_w(i), float(node["visits"]),
                           float(node["value_sum"]), float(node["visited_prior"]), PuctParams(*params))

    def backup(self, path: list[int], leaf: int, value: float, correction: float) -> None:
        """`value` (a win rate for the leaf's side to move) added to the leaf, then flipped and added up the path,
        `correction` (1 - virtual loss) added to every visit count on it."""
        if self.compiled:
            _c.arena_backup(self.nodes, self.edges, path, leaf, float(value), float(correction))
            return
        nodes = self.nodes
        nodes["visits"][leaf] += 1.0
        nodes["value_sum"][leaf] += value
        for j in range(len(path) - 2, -1, -2):
            node = path[j]
            child = int(self.edges["child"][int(nodes["first"][node]) + path[j + 1]])
            value = 1.0 - value
            nodes["in_n"][child] += correction
            nodes["in_w"][child] += value
            nodes["visits"][node] += correction
            nodes["value_sum"][node] += value

    def undo_virtual_loss(self, path: list[int], virtual_loss: float) -> None:
        """Take a collided descent's virtual loss back off its path."""
        nodes = self.nodes
        for j in range(0, len(path), 2):
            node = path[j]
            nodes["in_n"][int(self.edges["child"][int(nodes["first"][node]) + path[j + 1]])] -= virtual_loss
            nodes["visits"][node] -= virtual_loss

    # -- whole subtrees ---------------------------------------------------------------------------
    def subtree(self, root: int) -> np.ndarray:
        """Indices of the nodes below (and including) `root`, parents before their children."""
        order = [root]
        k = 0
        while k < len(order):
            i = order[k]
            k += 1
            children = self._block(i)["child"]
            order.extend(int(c) for c in children[children >= 0])
        return np.array(order, dtype=np.int64)

    def subtree_size(self, root: int) -> tuple[int, int]:
        """(nodes, bytes) of the subtree below `root`."""
        nodes, edges = self._subtree_counts(root)
        return nodes, nodes * NODE_DTYPE.itemsize + edges * EDGE_DTYPE.itemsize

    def _subtree_counts(self, root: int) -> tuple[int, int]:
        """(nodes, edges) of the subtree below `root`."""
        if self.compiled:
            return _c.arena_subtree_size(self.nodes, self.edges, root)
        order = self.subtree(root)
        return len(order), int(self.nodes["count"][order][self.nodes["first"][order] >= 0].sum())

    def compact(self, root: int) -> Arena:
        """A new arena holding only the subtree below `root` (as node 0), every record as it was; what the tree
        no longer reaches after a move is played is dropped with this one."""
        out = Arena.__new__(Arena)
        out.compiled = self.compiled
        if self.compiled:
            nodes, edges = self._subtree_counts(root)
            out.nodes, out.edges = _records(nodes, NODE_DTYPE), _records(edges, EDGE_DTYPE)
            _c.arena_compact(self.nodes, self.edges, root, out.nodes, out.edges)
        else:
            order = self.subtree(root)
            where = np.full(self.n_nodes, -1, dtype=np.int64)
            where[order] = np.arange(len(order))
            nodes = self.nodes[order]  # a copy, in the new order
            counts = np.where(nodes["first"] >= 0, nodes["count"], 0).astype(np.int64)
            starts = np.zeros(len(order), dtype=np.int64)
            np.cumsum(counts[:-1], out=starts[1:])
            edges = _records(int(counts.sum()), EDGE_DTYPE)
            for new, old in enumerate(order):
                if counts[new]:
                    block = self._block(int(old))
                    part = edges[starts[new]:starts[new] + counts[new]]
                    part[...] = block
                    part["child"] = np.where(block["child"] >= 0, where[np.maximum(block["child"], 0)], -1)
            nodes["first"] = np.where(nodes["first"] >= 0, starts, -1)
            out.nodes, out.edges = nodes, edges
        out.n_nodes, out.n_edges = len(out.nodes), len(out.edges)
        if len(out.edges) == 0:  # a leaf's subtree: room for the first expansion, as a new arena has
            out.edges = np.empty(_FIRST_EDGES, dtype=EDGE_DTYPE)
        return out
