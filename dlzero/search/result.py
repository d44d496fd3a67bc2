"""Reading a searched tree: move statistics, best move, principal variation, scores.

Conventions: win rates are for the side to move at the root; centipawns follow dlshogi,
cp = 756 * ln(p / (1 - p)), clipped to +-30000, which is also what proven results show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cshogi
import numpy as np

from dlzero.search.node import Node
from dlzero.search.tree import Tree

EVAL_COEF = 756.0
MAX_CP = 30000


def winrate_to_cp(p: float) -> int:
    """dlshogi's score: 756 * logit(p), clipped to +-30000."""
    if p >= 1.0:
        return MAX_CP
    if p <= 0.0:
        return -MAX_CP
    return int(max(-MAX_CP, min(MAX_CP, round(EVAL_COEF * math.log(p / (1.0 - p))))))


def cp_to_winrate(cp: float) -> float:
    """Inverse of `winrate_to_cp` (used to read evals stored in hcpe/hcpe3 files)."""
    return 1.0 / (1.0 + math.exp(-cp / EVAL_COEF))


@dataclass
class MoveStat:
    """One root move after search."""

    move: int
    usi: str
    visits: int
    winrate: float   # Q for the side to move at the root; the prior's value-free guess if unvisited
    prior: float
    proven: float | None  # 1.0 proven win for us, 0.0 proven loss, None unknown


def child_proof(node: Node, i: int) -> float | None:
    """The proven result of move `i` of `node` for the side choosing it (1 win, 0 loss), or None."""
    return _proof(node.child(i))


def _proof(child: Node | None) -> float | None:
    terminal = child.terminal if child is not None else None
    return None if terminal is None else 1.0 - terminal


def move_stats(tree: Tree) -> list[MoveStat]:
    """Root moves sorted best first: proven wins, then visits, then win rate."""
    root = tree.root
    if not root.expanded:
        return []
    stats = []
    visits, w, prior, children = root.n, root.w, root.prior, root.children
    for i, move in enumerate(root.moves):
        n = visits[i]
        q = w[i] / n if n > 0 else 0.0
        stats.append(MoveStat(int(move), cshogi.move_to_usi(int(move)), int(round(n)), float(q),
                              float(prior[i]), _proof(children[i])))
    stats.sort(key=lambda s: (s.proven == 1.0, s.proven != 0.0, s.visits, s.winrate), reverse=True)
    return stats


def best_index(node: Node) -> int:
    """Child to play: a proven win if any, else the most visited (ties by Q), avoiding proven losses."""
    proofs = np.array([_proof(c) if c is not None else -1.0 for c in node.children], dtype=object)
    wins = [i for i, p in enumerate(proofs) if p == 1.0]
    if wins:
        return wins[0]
    n = node.n
    q = np.divide(node.w, n, out=np.zeros_like(n), where=n > 0)
    score = n + q * 1e-3
    losing = np.array([p == 0.0 for p in proofs])
    if not losing.all():
        score = np.where(losing, -1.0, score)
    return int(np.argmax(score))


def chosen_index(tree: Tree) -> int:
    """The root move to play after a search: a proven win if any, else a Gumbel search's choice
    (`GumbelRoot.choice`) unless it is proven lost, else `best_index`."""
    root = tree.root
    i = best_index(root)
    if tree.gumbel is None or child_proof(root, i) == 1.0:
        return i
    choice = tree.gumbel.choice(root.n, root.w)
    return i if child_proof(root, choice) == 0.0 else choice


def principal_variation(tree: Tree, max_len: int = 32) -> list[int]:
    """Moves along the best child from the root while nodes are expanded."""
    pv = []
    node = tree.root
    while node is not None and node.expanded and len(pv) < max_len and len(node.moves):
        i = chosen_index(tree) if node == tree.root else best_index(node)
        if node.n[i] <= 0 and child_proof(node, i) is None:
            break
        pv.append(int(node.moves[i]))
        node = node.child(i)
    return pv


def root_winrate(tree: Tree) -> float:
    """Win rate of the best move for the side to move (1/0 when proven)."""
    root = tree.root
    if not root.expanded or len(root.moves) == 0:
        return 0.0
    i = chosen_index(tree)
    proof = child_proof(root, i)
    if proof is not None:
        return proof
    n = root.n[i]
    return float(root.w[i] / n) if n > 0 else root.q()


def mate_distance(tree: Tree) -> int | None:
    """Plies to a proven mate along the PV (positive: we mate; negative: we are mated), else None.

    Only a mate counts: a PV that ends in another proven result (a repetition, a draw by move
    count, a declaration) has no mate distance, so it is reported as a score, not as a mate.
    """
    pv = principal_variation(tree, 64)
    node = tree.root
    for ply, move in enumerate(pv):
        child = node.child(node.child_index(move))
        if child is not None and child.terminal is not None:
            if child.mate_plies is None:
                return None
            plies = ply + 1 + child.mate_plies
            ours = (ply % 2 == 0) == (child.terminal == 0.0)
            return plies if ours else -plies
        node = child
    return None
