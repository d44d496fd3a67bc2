"""The built-in classical reference opponent: material-only alpha-beta with a node budget.

`AlphaBeta(nodes)` is an anchor of the rating scale (`alphabeta:100`, `alphabeta:1000`, ...). An anchor
is only useful if it means the same thing in every run and every version, so **this module must never
change the moves it plays**: the piece values, the move order, the node counting, the mate searches
and the tie-breaks below are fixed. A stronger or different classical player is a new anchor with a new
name, never an edit here. `tests/test_alphabeta.py` pins moves on hand-made positions to catch drift.

How a move is chosen (all deterministic: no clock, no randomness, the same position and history give
the same move on any machine):

1. one legal move: play it. A mate found by cshogi's `mate_move_in_1ply`, then `mate_move(3)` (not in
   check): play it. These are free (not counted as nodes).
2. iterative deepening negamax alpha-beta, depth 1, 2, ... until the budget of `nodes` positions is
   spent. Every position entered (root, interior, quiescence) counts one node. When the budget runs out
   inside an iteration, that iteration is abandoned and the best move of the last finished one is
   played; if even depth 1 did not finish, the best move among the root moves it did search.
3. at depth 0, a quiescence search over captures (stand pat on the material score), or over all
   evasions when in check; a side to move that has a mate in 1 scores as mating (so even depth 1 sees
   and avoids a mate-in-1 reply).
4. scores: material from the side to move's view, plain piece values (`dlzero.play.material`, frozen
   with this module) for pieces on the board and in hand, promoted pieces at their own value; a mate
   in k plies scores MATE - k; a repetition draw scores 0, and perpetual check loses for the checker,
   as matches score them.
5. move order: at the root, the previous iteration's best move first; then captures by most valuable
   victim, cheaper attacker first; then promotions; then the rest in cshogi's generation order. Ties keep
   the first move in this order.

Speed: see `dlzero bench alphabeta` (positions/s on one core).
"""

from __future__ import annotations

from collections.abc import Sequence

import cshogi

from dlzero.game_end import REPETITION_PLIES
from dlzero.play.game import Game
from dlzero.play.material import PIECE_VALUES, captures, material, move_gain

MATE = 100_000
MATE_BOUND = MATE - 1_000  # scores beyond this are mates
INFINITY = 1_000_000
MAX_DEPTH = 64
MAX_QUIESCENCE_PLIES = 16
ROOT_MATE_PLIES = 3


def _ordered(moves: list[int], first: int = 0) -> list[int]:
    """`first` (if given), captures (most valuable victim, then cheapest attacker), promotions, the rest."""
    taking: list[tuple[int, int, int, int]] = []
    promotions: list[int] = []
    quiet: list[int] = []
    for i, move in enumerate(moves):
        if move == first:
            continue
        victim = cshogi.move_cap(move)
        if victim:
            attacker = 0 if cshogi.move_is_drop(move) else PIECE_VALUES[cshogi.move_from_piece_type(move)]
            taking.append((-PIECE_VALUES[victim], attacker, i, move))
        elif cshogi.move_is_promotion(move):
            promotions.append(move)
        else:
            quiet.append(move)
    taking.sort()
    head = [first] if first and first in moves else []
    return head + [c[3] for c in taking] + promotions + quiet


class _OutOfNodes(Exception):
    """The node budget is spent: abandon the current iteration."""


class AlphaBeta:
    """A `MoveChooser`: fixed-node-budget alpha-beta on material (see the module docstring)."""

    def __init__(self, nodes: int) -> None:
        if nodes < 1:
            raise ValueError(f"alphabeta node budget must be >= 1, got {nodes}")
        self.nodes = nodes
        self.name = f"alphabeta:{nodes}"
        self._board: cshogi.Board = cshogi.Board()
        self._count = 0
        self.total_nodes = 0  # positions searched over this object's life (for speed figures)

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        return [self.best_move(game.board) for game in games]

    def best_move(self, board: cshogi.Board) -> int | None:
        """The move this rung plays in `board` (whose history counts for repetitions); None if none is legal."""
        moves = list(board.legal_moves)
        if len(moves) <= 1:
            return moves[0] if moves else None
        if not board.is_check():
            mate = board.mate_move_in_1ply() or board.mate_move(ROOT_MATE_PLIES)
            if mate:
                return mate
        self._board = board.copy()  # searched on a copy: an abandoned iteration may leave it mid-line
        self._count = 0
        root_material = material(board)
        best = 0
        try:
            for depth in range(1, MAX_DEPTH + 1):
                best, score = self._root(moves, depth, root_material, best)
                if abs(score) >= MATE_BOUND:
                    break  # a forced mate either way: deeper search cannot change the verdict
        except _OutOfNodes as out:
            if not best:
                best = out.args[0] if out.args else 0
        self.total_nodes += self._count
        return best or _ordered(moves)[0]

    def _enter(self) -> None:
        self._count += 1
        if self._count > self.nodes:
            raise _OutOfNodes

    def _root(self, moves: list[int], depth: int, mat: int, previous: int) -> tuple[int, int]:
        """(best move, score) of one full-width iteration; the partial best travels in `_OutOfNodes`."""
        board = self._board
        alpha, best = -INFINITY, 0
        try:
            self._enter()
            for move in _ordered(moves, previous):
                board.push(move)
                score = -self._negamax(depth - 1, -INFINITY, -alpha, 1, -(mat + move_gain(move)))
                board.pop()
                if score > alpha:
                    alpha, best = score, move
        except _OutOfNodes:
            raise _OutOfNodes(best) from None
        return best, alpha

    def _negamax(self, depth: int, alpha: int, beta: int, ply: int, mat: int) -> int:
        self._enter()
        board = self._board
        rep = board.is_draw(REPETITION_PLIES)
        if rep == cshogi.REPETITION_DRAW:
            return 0
        if rep == cshogi.REPETITION_WIN:  # the opponent gave perpetual check
            return MATE - ply
        if rep == cshogi.REPETITION_LOSE:
            return -(MATE - ply)
        if depth <= 0:
            return self._quiescence(alpha, beta, ply, mat, 0)
        if not board.is_check() and board.mate_move_in_1ply():
            return MATE - ply - 1
        moves = list(board.legal_moves)
        if not moves:
            return -(MATE - ply)
        for move in _ordered(moves):
            board.push(move)
            score = -self._negamax(depth - 1, -beta, -alpha, ply + 1, -(mat + move_gain(move)))
            board.pop()
            if score > alpha:
                alpha = score
                if alpha >= beta:
                    break
        return alpha

    def _quiescence(self, alpha: int, beta: int, ply: int, mat: int, qply: int) -> int:
        board = self._board
        if board.is_check():
            moves = list(board.legal_moves)
            if not moves:
                return -(MATE - ply)
            if qply >= MAX_QUIESCENCE_PLIES:
                return mat
            candidates = _ordered(moves)
        else:
            if board.mate_move_in_1ply():
                return MATE - ply - 1
            if mat >= beta or qply >= MAX_QUIESCENCE_PLIES:
                return mat
            alpha = max(alpha, mat)
            candidates = _ordered(captures(board))
        for move in candidates:
            self._enter()
            board.push(move)
            score = -self._quiescence(-beta, -alpha, ply + 1, -(mat + move_gain(move)), qply + 1)
            board.pop()
            if score > alpha:
                alpha = score
                if alpha >= beta:
                    break
        return alpha
