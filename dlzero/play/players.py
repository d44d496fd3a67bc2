"""The players dlzero's own code provides: the search over a network, and the random mover.

Both are `MoveChooser`s, like the classical alpha-beta anchor (`dlzero.gating.alphabeta`) and outside
USI engines (`dlzero.gating.usi_opponent`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlzero.config import SearchConfig
from dlzero.inference.base import Evaluator
from dlzero.play.game import Game
from dlzero.search import Search, Tree, chosen_index, find_mate, root_winrate

RANDOM = "random"


class RandomMover:
    """A `MoveChooser` playing a uniformly random legal move; reproducible from its seed. Pinned at
    Elo 0 on the rating scale: the floor any learning must beat."""

    name = RANDOM

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        out: list[int | None] = []
        for game in games:
            moves = list(game.board.legal_moves)
            out.append(int(moves[self._rng.integers(len(moves))]) if moves else None)
        return out


class SearchPlayer:
    """A `MoveChooser` that searches with a network: a mate found at the root (`root_mate_depth`
    plies) is played at once; every other game gets `playouts` playouts, all games in one
    `Search.run`, and the search's move (the most visited, or Gumbel's choice); a game whose best
    win rate is below `resign_threshold` (0: never) is resigned.

    Self-play's player (`dlzero.selfplay.games`) is this one with its own answers to three questions:
    what a found mate does (`mate_found`), how a game's search is set up (`prepare`: playouts, root
    noise) and what is done with its result (`pick`: the move, resignation, training targets).
    """

    def __init__(self, evaluator: Evaluator, cfg: SearchConfig, playouts: int, rng: np.random.Generator, *,
                 resign_threshold: float = 0.0, leaves_per_tree: int | None = None, name: str = "search") -> None:
        self.search = Search(evaluator, cfg, rng)
        self.playouts = playouts
        self.resign_threshold = resign_threshold
        self.leaves_per_tree = leaves_per_tree  # None: the search config's
        self.name = name

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        moves: list[int | None] = [None] * len(games)
        searched: list[int] = []
        for k, game in enumerate(games):
            mate = find_mate(game.board, self.search.cfg.root_mate_depth)
            if mate:
                moves[k] = self.mate_found(game, mate)
            else:
                searched.append(k)
        trees = [self.tree(games[k]) for k in searched]
        playouts = [self.prepare(games[k], tree) for k, tree in zip(searched, trees, strict=True)]
        if trees:
            self.search.run(trees, playouts, leaves_per_tree=self.leaves_per_tree)
        for k, tree in zip(searched, trees, strict=True):
            moves[k] = self.pick(games[k], tree)
        return moves

    def tree(self, game: Game) -> Tree:
        """This player's search tree of `game` (made on first use; `play_move` keeps it up to date)."""
        tree = game.trees.get(self)
        if tree is None:
            tree = game.trees[self] = Tree(game.board.copy())
        return tree

    def mate_found(self, game: Game, move: int) -> int:
        """The move to play when the root mate search found `move`: that move."""
        return move

    def prepare(self, game: Game, tree: Tree) -> int:
        """Set up the search of `game` and return its playouts."""
        return self.playouts

    def pick(self, game: Game, tree: Tree) -> int | None:
        """The move after the search, or None to resign."""
        if self.resign_threshold > 0 and root_winrate(tree) < self.resign_threshold:
            return None
        return int(tree.root.moves[chosen_index(tree)])  # PUCT's most visited, or Gumbel's choice
