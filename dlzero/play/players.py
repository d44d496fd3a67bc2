"""The players dlzero's own code provides: the search over a network, the random mover, and miniosl's
network without search.

All are `MoveChooser`s, like the classical alpha-beta anchor (`dlzero.play.alphabeta`) and outside
USI engines (`dlzero.play.usi_opponent`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlzero.config import SearchConfig
from dlzero.inference.base import Evaluator
from dlzero.inference.miniosl import MinioslNetwork
from dlzero.play.game import Game
from dlzero.position import position_string, start_position
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


class MinioslPlayer:
    """A `MoveChooser` playing miniosl's network without search: the rating anchor `miniosl:sample=N`,
    the teacher that `dlzero teach --teacher miniosl` distils from, as a yardstick for its students.

    For the first `sample_plies` plies of a game's history the move is drawn from the network's policy
    (seeded), so twenty games are twenty games and not one game twenty times; after that it plays the
    network's own move (its most probable). The network sees each game's whole history."""

    def __init__(self, network: MinioslNetwork, name: str, sample_plies: int = 0, seed: int = 0) -> None:
        self.network, self.name, self.sample_plies, self.seed = network, name, sample_plies, seed
        self._rng = np.random.default_rng(seed)

    def replica(self, slot: int) -> MinioslPlayer:
        """The player of concurrent game slot `slot` (`dlzero.play.driver.Replicable`): the same network (an
        onnxruntime session serves threads at once) with its own draws, seeded by the slot."""
        return self if slot == 0 else MinioslPlayer(self.network, self.name, self.sample_plies, self.seed + 7919 * slot)

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        out: list[int | None] = []
        for start in range(0, len(games), MINIOSL_BATCH):
            batch = games[start:start + MINIOSL_BATCH]
            evals = self.network.evaluate([(position_string(g.board, start_position(g.board)), g.board) for g in batch])
            for game, e in zip(batch, evals, strict=True):
                move16 = e.best()
                if len(game.board.history) < self.sample_plies:
                    move16 = e.moves[int(self._rng.choice(len(e.moves), p=e.probs / e.probs.sum()))]
                out.append(game.board.move_from_move16(move16))
        return out


MINIOSL_BATCH = 32  # positions per network call


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
