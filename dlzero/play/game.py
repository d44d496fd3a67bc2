"""A game in progress, what a player is, and the rules and the move that every game of dlzero goes by.

Self-play, the teacher's own games, the gate, ratings and `dlzero match` play the same game: one rules
profile (`play_rules`), one way to play a move (`play_move`: the board and every player's search tree
move together), and one protocol for whoever picks the moves (`MoveChooser`: the search, the random
mover, alpha-beta, USI engines, the teacher). `dlzero.play.driver` runs many such games in lockstep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol, runtime_checkable

import cshogi

from dlzero.game_end import GameRules, Verdict
from dlzero.search import Tree

END_RESIGN = "resign"  # Verdict.reason of a game a player resigned (the rules' own reasons: dlzero.game_end)
END_TIME = "time"  # Verdict.reason of a game lost on time: a clocked player answered after its byoyomi


def clock_after(left_ms: float, move_ms: float, inc_ms: float) -> float:
    """A game clock after a move in time, as a GUI keeps it: the move's wall time comes off (never below zero),
    then the Fischer increment goes on. The match's referee and its summary both count it this way."""
    return max(left_ms - move_ms, 0.0) + inc_ms


def play_rules(max_moves: int, declaration: str) -> GameRules:
    """The rules games are played by: sennichite at the fourth occurrence (the search already scores
    the first recurrence as a draw, so play avoids it unless a draw is what it wants), mate, the
    entering-king `declaration` rule, then the move cap. Self-play and matches share them, so the gate
    scores games the way training sees them."""
    return GameRules(repetitions=3, max_moves=max_moves, declaration=declaration)


@dataclass(eq=False)
class Game:
    """One game in progress (compared by identity: two games are never the same game).

    `board` holds the whole game from where its history starts (an opening's moves included).
    `seats` says which player of the driver's list plays Black and which White ((0, 0): one player
    plays both sides, as in self-play). `trees` holds each searching player's tree of this game, by
    player; `play_move` advances them all. `end` is set once the game is over. `move_ms`: the wall time
    of each move a clocked player made (an outside engine: `go` to `bestmove`), by its index in the board's
    history; a move that came too late and lost on time is kept at the index it would have had. `move_nodes`:
    what the engine said it searched for each of those moves (its last scored `info` line's nps x time, else
    its `nodes`; for dlzero's engine the playouts of that move, whose `nodes` counts the reused tree too), by
    the same index, where it said. `clock_ms`: a game clock's remaining main time by colour (cshogi.BLACK,
    cshogi.WHITE), kept by players on one (`dlzero.play.usi_opponent`), from their first move.
    """

    board: cshogi.Board
    _: KW_ONLY
    seats: tuple[int, int] = (0, 0)
    opening_plies: int = 0  # the first plies of the board's history, which came from the opening
    trees: dict[object, Tree] = field(default_factory=dict)
    end: Verdict | None = None
    move_ms: dict[int, float] = field(default_factory=dict)
    move_nodes: dict[int, int] = field(default_factory=dict)
    clock_ms: dict[int, float] = field(default_factory=dict)

    @property
    def played(self) -> int:
        """Plies played after the opening."""
        return len(self.board.history) - self.opening_plies


@runtime_checkable
class MoveChooser(Protocol):
    """A player: given the games where it is to move (each `Game.board` holds the full history, the
    side to move is this player), one move per game, or None to resign. It must leave the boards as it
    found them; a player that searches keeps its tree of a game in `Game.trees[self]`, and may end a
    game itself by setting `Game.end` before its move is played (self-play adjudicates a found mate, the
    teacher ends a game on its announced mate or declaration)."""

    name: str

    def choose(self, games: Sequence[Game]) -> list[int | None]: ...


def play_move(game: Game, move: int, reuse: bool) -> None:
    """Play `move` on the game's board and in every tree of it; with `reuse` each tree keeps the
    subtree below the move, else it starts again from the new position."""
    game.board.push(move)
    for tree in game.trees.values():
        tree.advance(move, reuse)
