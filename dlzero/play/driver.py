"""Many games in lockstep: the one loop every game of dlzero is played in (self-play, the gate, ratings,
`dlzero match`).

Each step, each player in turn moves in every game where it is to move, all at once: a searching
player runs one `Search.run` over all those games, so its network sees one batch of many games
instead of one position at a time (dlshogi's design: no virtual loss needed, full batches). Before a
player moves, the rules (`dlzero.game_end` with the caller's `GameRules`) settle the games that are
over. A move of None resigns. Finished games are handed to `on_end` and a new game from `start` takes
their place, until `start` has no more or `should_stop` says so; games still running then are
returned unfinished.

Two orders of the same play, so that a seed replays the games it always did: with `fixed_slots`
(self-play) a game finds out that the rules ended it when it is next to move, and a new game takes
its slot; otherwise (matches) every game is settled after each step's moves, and new games join at
the back. Nothing else differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from dlzero.game_end import GameRules, Verdict, game_end
from dlzero.play.game import END_RESIGN, Game, MoveChooser, play_move

G = TypeVar("G", bound=Game)


@dataclass
class Played(Generic[G]):
    """What `play_lockstep` did: the steps it ran and the games still running when it stopped."""

    steps: int
    unfinished: list[G]


def play_lockstep(players: Sequence[MoveChooser], start: Callable[[], G | None], on_end: Callable[[G], None],
                  rules: GameRules, *, parallel: int, reuse_trees: bool, fixed_slots: bool = False,
                  should_stop: Callable[[int], bool] | None = None) -> Played[G]:
    """Play games from `start()` (None: no more), `parallel` at a time, until none is left.

    `players[i]` plays the sides whose `Game.seats` entry is i. `on_end(game)` gets each finished
    game (`game.end` says how it ended) before a new one is started. `should_stop(steps)`, asked
    before every step, ends the play early. `reuse_trees`: whether search trees keep the subtree of
    the move played (see `play_move`).
    """
    games: list[G] = []
    while len(games) < parallel and (game := start()) is not None:
        games.append(game)
    steps = 0
    while games:
        if should_stop is not None and should_stop(steps):
            break
        steps += 1
        for seat, player in enumerate(players):
            movers = [g for g in games if g.end is None and g.seats[g.board.turn] == seat]
            _settle(movers, rules)
            movers = [g for g in movers if g.end is None]
            if not movers:
                continue
            for game, move in zip(movers, player.choose(movers), strict=True):
                if move is None:
                    game.end = Verdict(1 - game.board.turn, END_RESIGN)
                else:
                    play_move(game, move, reuse_trees)
        if not fixed_slots:
            _settle(games, rules)
        for game in [g for g in games if g.end is not None]:
            i = games.index(game)
            on_end(game)
            new = start()
            if new is not None and fixed_slots:
                games[i] = new
                continue
            del games[i]
            if new is not None:
                games.append(new)
    return Played(steps, games)


def _settle(games: Sequence[Game], rules: GameRules) -> None:
    """Set `end` on every game that is over by the rules."""
    for game in games:
        if game.end is None:
            game.end = game_end(game.board, rules)
