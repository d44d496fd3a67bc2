"""Many games in lockstep: the one loop every game of dlzero is played in (self-play, the teacher's own
games, the gate, ratings, `dlzero match`).

Each step, each player in turn moves in every game where it is to move, all at once: a searching
player runs one `Search.run` over all those games, so its network sees one batch of many games
instead of one position at a time (dlshogi's design: no virtual loss needed, full batches). Before a
player moves, the rules (`dlzero.game_end` with the caller's `GameRules`) settle the games that are
over, and after each step every game is settled again, so that a game the last move ended is never
returned as unfinished. A move of None resigns (unless the player has set the game's end itself).
Finished games are handed to `on_end` and a new game from `start` takes their slot, until `start` has
no more or `should_stop` says so; games still running then are returned unfinished.

Players that think about one position at a time (outside USI engines, miniosl's network) gain
nothing from a batch: in lockstep each waits for the other, so two engines on two cores play one
game at a time. `play_concurrently` gives each of `parallel` threads its own players (another engine
process each: `Replicable`) and one game at a time, so that many games really run at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from dlzero.game_end import GameRules, Verdict, game_end
from dlzero.play.game import END_RESIGN, Game, MoveChooser, play_move

G = TypeVar("G", bound=Game)


@dataclass
class Played(Generic[G]):
    """What `play_lockstep` did: the steps it ran and the games still running when it stopped."""

    steps: int
    unfinished: list[G]


def play_lockstep(players: Sequence[MoveChooser], start: Callable[[], G | None], on_end: Callable[[G], None],
                  rules: GameRules, *, parallel: int, reuse_trees: bool,
                  should_stop: Callable[[int], bool] | None = None) -> Played[G]:
    """Play games from `start()` (None: no more), `parallel` at a time, until none is left.

    `players[i]` plays the sides whose `Game.seats` entry is i. `on_end(game)` gets each finished
    game (`game.end` says how it ended) before a new one is started. `should_stop(steps)`, asked
    before every step, ends the play early. `reuse_trees`: whether search trees keep the subtree of
    the move played (see `play_move`).
    """
    games: list[G] = []
    while len(games) < parallel and (game := _started(start, len(players))) is not None:
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
                    if game.end is None:
                        game.end = Verdict(1 - game.board.turn, END_RESIGN)
                else:
                    play_move(game, move, reuse_trees)
        _settle(games, rules)
        for i, game in enumerate(games):
            if game.end is not None:
                on_end(game)
                games[i] = _started(start, len(players))
        games = [g for g in games if g is not None]
    return Played(steps, games)


@runtime_checkable
class Replicable(Protocol):
    """A player that can play another game at the same time: `replica(slot)` is a player of its own for the
    games of thread `slot` (slot 0: the player itself), alike in every setting (another process of the
    same engine, the same network with a seed of its own); the original's `close` ends them all."""

    def replica(self, slot: int) -> MoveChooser: ...


def concurrent_slots(players: Sequence[MoveChooser], parallel: int) -> list[list[MoveChooser]] | None:
    """Each thread's players for `play_concurrently` when every player is `Replicable` and more than one
    game may run; else None (lockstep: a searching player batches its games into one network call)."""
    if parallel < 2 or not all(isinstance(p, Replicable) for p in players):
        return None
    return [[p.replica(slot) for p in players] for slot in range(parallel)]  # type: ignore[union-attr]


def play_concurrently(slots: Sequence[Sequence[MoveChooser]], start: Callable[[], G | None],
                      on_end: Callable[[G], None], rules: GameRules, *, reuse_trees: bool,
                      should_stop: Callable[[int], bool] | None = None) -> int:
    """Play games from `start()` on one thread per slot, each playing one game at a time with that slot's
    players, until `start` has no more or `should_stop` says so; returns the steps played. `start`,
    `on_end` and `should_stop` are called under one lock, so callers keep them as they are for
    `play_lockstep`. When a thread fails, the others stop at their next move and the first error is
    raised (games in progress then are dropped, as `should_stop` drops them)."""
    lock = threading.Lock()
    failed = threading.Event()

    def locked_start() -> G | None:
        with lock:
            return None if failed.is_set() else start()

    def locked_end(game: G) -> None:
        with lock:
            on_end(game)

    def stop(steps: int) -> bool:
        if failed.is_set():
            return True
        with lock:
            return should_stop is not None and should_stop(steps)

    def run(players: Sequence[MoveChooser]) -> int:
        try:
            return play_lockstep(players, locked_start, locked_end, rules, parallel=1, reuse_trees=reuse_trees,
                                 should_stop=stop).steps
        except BaseException:
            failed.set()
            raise

    pool = ThreadPoolExecutor(len(slots), thread_name_prefix="game")
    try:
        futures = [pool.submit(run, players) for players in slots]
        return sum(f.result() for f in futures)
    except BaseException:
        failed.set()  # Ctrl-C here: the threads stop at their next move (closing the engines ends a move early)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _started(start: Callable[[], G | None], players: int) -> G | None:
    """The next game from `start`, checked to seat only players there are (else it would wait forever)."""
    game = start()
    if game is not None and max(game.seats) >= players:
        raise ValueError(f"a game seats player {max(game.seats)} but only {players} play")
    return game


def _settle(games: Sequence[Game], rules: GameRules) -> None:
    """Set `end` on every game that is over by the rules."""
    for game in games:
        if game.end is None:
            game.end = game_end(game.board, rules)
