"""The mate guard: before a searched move is played, df-pn checks that it hands the opponent no mate.

Why: the leaf mate search (`leaf_mate_depth`, cshogi's `mate_move`) sees mates of a few plies, and
a 400-playout search rarely reads deeper along the opponent's checks. In the rating games of the
teacher-trained 5x64 student against GPS Shogi at depth 4, 11 of 17 losses contained a move after
which the opponent had a mate that cshogi's df-pn proved in 20k nodes while another move had none
(scripts/mate_blunders.py). df-pn at every leaf would cost about 0.7 ms a leaf at only 1k nodes; at
the root it is one search per move played (a few ms on average at 30k nodes, most positions having
few checks), so it runs there, on the moves the search would play. Measured, it did not change the
score against GPS Shogi (by the time a mate is provable at the root those games were lost:
docs/benchmarks/teacher.md, "The mate guard"), so it is off by default: a cheap safety, not a lever.

An engine that must answer while it thinks (`dlzero usi`, `dlzero analyze`) runs the guard's df-pn in
its mate helper process (`dlzero.search.mate`): in the engine's own process df-pn holds the GIL for
its whole run, and a budget of 10^7 nodes (1.5-100 us a node) kept `stop`, `isready` and `quit`
waiting for seconds to minutes. There a stop ends the guard at once, and the move the search chose
stands, checked only as far as the guard got. Self-play and gating, many games in one process with
no one to answer, keep df-pn in-process and save the helper's round trips.
"""

from __future__ import annotations

from collections.abc import Callable

import cshogi

from dlzero.search.mate import MateSolver
from dlzero.search.result import child_proof, chosen_index
from dlzero.search.tree import Tree

__all__ = ["DFPN_MAX_PLIES", "guard_root", "opponent_mate"]

DFPN_MAX_PLIES = 31  # longest mate df-pn looks for (cshogi's DfPn depth)


def opponent_mate(board: cshogi.Board, dfpn: cshogi.DfPn) -> tuple[int, int]:
    """(plies of a mate the side to move has, 0 if df-pn found none; df-pn nodes spent).

    A side to move in check is not searched: its escapes are not checks, which df-pn's attacker
    must give, so a checking move always passes the guard.
    """
    if board.is_check():
        return 0, 0
    found = dfpn.search(board)
    spent = max(dfpn.searched_node, 1)
    return (max(len(dfpn.get_pv(board)), 1) if found else 0), spent


def _helper_mate(board: cshogi.Board, solver: MateSolver, nodes: int,
                stop: Callable[[], bool] | None) -> tuple[int, int] | None:
    """`opponent_mate` in `solver`'s helper process within `nodes` nodes, or None when `stop()` turned
    true first (the helper's search is abandoned)."""
    answer = solver.search_counted(board, DFPN_MAX_PLIES, nodes, stop=stop)
    if answer is None:
        return None
    pv, spent = answer
    return len(pv), max(spent, 1)


def guard_root(tree: Tree, nodes: int, solver: MateSolver | None = None,
               stop: Callable[[], bool] | None = None) -> int:
    """Mark as proven lost each move the search would play that lets the opponent mate, best
    first, until one passes or `nodes` df-pn nodes are spent; return how many were marked.

    A marked move's child becomes a proven win for the opponent (its mate length included), so
    `chosen_index`, the move statistics, the principal variation and a resignation all see the
    loss. One budget for all the moves checked bounds the guard's time (about 3 us a node on
    one core: 30k nodes ~0.1 s), which a move made against the clock needs; most positions cost a
    small part of it (few checks to try). When the budget runs out, the next move is played as the
    search chose it. The root's board is used and left as it was.

    With `solver` the df-pn searches run in its helper process, and `stop()` turning true ends the
    guard at once with the moves marked so far (without `solver` it is looked at between searches).
    """
    root = tree.root
    moves = root.moves
    if nodes <= 0 or not root.expanded or len(moves) < 2:
        return 0
    dfpn = cshogi.DfPn(DFPN_MAX_PLIES, nodes) if solver is None else None
    board = tree.board
    marked = 0
    left = nodes
    while left > 0 and not (stop is not None and stop()):
        i = chosen_index(tree)
        if child_proof(root, i) is not None:  # a proven win, or every move already proven lost
            break
        board.push(int(moves[i]))
        try:
            if dfpn is not None:
                dfpn.set_max_search_node(left)
                found = opponent_mate(board, dfpn)
            else:
                found = _helper_mate(board, solver, left, stop)
        finally:
            board.pop()
        if found is None:  # stopped
            break
        plies, spent = found
        left -= spent
        if not plies:
            break
        tree.arena.set_proof(tree.arena.make_child(root.index, i), 1.0, plies)
        marked += 1
    return marked
