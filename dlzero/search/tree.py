"""A search tree: the root position with its history, the nodes below it, and per-search bookkeeping.

Its own module so that the search (`dlzero.search.mcts`) and the modules that read a searched tree
(`dlzero.search.result`, the mate guard) all depend on it, and not on each other in a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import cshogi
import numpy as np

from dlzero.search.arena import Arena
from dlzero.search.gumbel import GumbelRoot
from dlzero.search.node import Node

__all__ = ["Tree"]


@dataclass
class Tree:
    """One search: a root position (with its game history) and the tree grown below it.

    `board` is owned by the tree: the search pushes and pops moves on it, and leaves it at the
    root position between steps.
    """

    board: cshogi.Board
    arena: Arena = field(default_factory=Arena)  # the nodes and edges (dlzero.search.arena)
    root_index: int = 0          # the root's node in `arena`
    noise: bool = False          # add Dirichlet noise to the root priors (self-play)
    playouts_done: int = 0       # playouts completed in the current `run`
    playouts_wanted: int = 0     # playouts the current `run` asked for
    collisions: int = 0
    inflight: int = 0            # leaves of this tree in a batch being evaluated
    noised: bool = False
    gumbel: GumbelRoot | None = None  # the current search's Gumbel root (search.algorithm: gumbel)
    clean_prior: np.ndarray | None = None  # the root priors before noise (for the policy target)
    # (board, depth below the root, legal moves) -> mask of the moves the search may try, or None for all
    move_filter: Callable[[cshogi.Board, int, np.ndarray], np.ndarray | None] | None = None

    @property
    def nodes(self) -> int:
        """Nodes in the tree."""
        return self.arena.n_nodes

    @property
    def memory(self) -> int:
        """Bytes the tree holds (`Arena.nbytes`; bounded by `search.hash_mb`)."""
        return self.arena.nbytes

    @property
    def root(self) -> Node:
        return Node(self.arena, self.root_index)

    @property
    def done(self) -> bool:
        return self.playouts_done >= self.playouts_wanted

    def advance(self, move: int, reuse: bool = True) -> None:
        """Play `move` at the root; with `reuse`, the subtree below it becomes the new tree.

        The new root forgets any proven result it had as a leaf (a leaf proof, such as a mate
        found there, is re-derived by the root checks) and gets fresh root noise if asked. The
        subtree is copied into a new arena (`Arena.compact`), so the rest of the old tree is freed.
        """
        i = self.root.child_index(move) if reuse else -1
        child = self.root.child(i) if i >= 0 else None
        self.board.push(move)
        self.arena = self.arena.compact(child.index) if child is not None and child.expanded else Arena()
        self.root_index = 0
        self.arena.set_proof(0, None, None)
        self.noised = False
        self.gumbel = None
        self.clean_prior = None
