"""An outside USI engine as a side of a match: a rating anchor (`gpsshogi:depth=4`,
`fairy-stockfish:skill=0:byoyomi=100`, `usi:PATH:...`) or `dlzero rate --engine NAME=COMMAND`.

The process (`dlzero.play.usi_client.UsiClient`) is started on the first move it is asked for and kept alive
across all the games of a rating session; it is told `usinewgame` once. Games played at once
(`dlzero.play.driver.play_concurrently`) each get a process of their own (`replica`), started alike and kept
as long as the first. A process may still play several games interleaved (the arena's lockstep), so there is
no single "next game" to announce; every `position` carries the game's start and its full move list, so no
state of another game can reach a move except through the engine's hash table. A reply `bestmove resign`,
`bestmove win` (the arena has already ended every game a declaration wins) or an illegal move loses the game;
an engine that exits or stays silent past `timeout_s` is an error naming the engine and the tail of its
stderr, and `close()` (which rating sessions call in a `finally`) always ends the process.

The clock: with `tolerance_ms` given and a byoyomi in its `go`, each move's wall time (`go` written to
`bestmove` read, `dlzero.play.usi_client.SearchResult.time_ms`) is checked against the byoyomi plus
`tolerance_ms`, the allowance for the pipe and this process noticing the line (a quarter of a millisecond
measured, scripts/clock_delay.py; the rest covers a loaded machine's scheduling). A later move loses the
game on time (`END_TIME`) and is not played, as a GUI or a server would have flagged the engine before it
arrived. Every move's time is kept in `Game.move_ms`, the late one too, so the record shows it.

A game clock (`Go.time_ms`: `time=MS` in an engine's name, with `inc=MS` or `byoyomi=MS`) is kept per game and
side in `Game.clock_ms`, as a GUI keeps it: each `go` sends both sides' remaining main time (the opponent's
whole main time until it has moved), a move's wall time comes off the mover's, the increment is added after a
move in time, and a move later than the remaining time (plus the byoyomi) plus `tolerance_ms` loses on time.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence

import cshogi

from dlzero.game_end import Verdict
from dlzero.play.game import END_TIME, Game, clock_after
from dlzero.play.usi_client import Go, UsiClient, UsiClientError

__all__ = ["UsiClientError", "UsiOpponent", "byoyomi_of"]

log = logging.getLogger("dlzero.play.usi")


def byoyomi_of(go: Go | str) -> int | None:
    """The byoyomi (or movetime) in ms that `go` gives the engine, None if it gives none (`nodes 800`)."""
    if isinstance(go, Go):
        return go.byoyomi_ms
    words = go.split()
    for key in ("byoyomi", "movetime"):
        if key in words[:-1]:
            try:
                return int(words[words.index(key) + 1])
            except ValueError:
                return None
    return None


class UsiOpponent:
    """A `MoveChooser` backed by a USI engine process. `command` is split like a shell command line (a
    bare path or `dlzero usi --model m.onnx --set usi.playouts=64` both work); `go` is a `Go` or the
    text after `go` (e.g. `byoyomi 1000`, `nodes 800`: whatever the engine understands). `tolerance_ms`:
    enforce the byoyomi of `go` with this allowance (None: moves are timed, never flagged)."""

    def __init__(self, name: str, command: str | Sequence[str], go: Go | str = "byoyomi 1000",
                 timeout_s: float = 120.0, options: Mapping[str, object] | None = None,
                 tolerance_ms: int | None = None) -> None:
        self.name = name
        self.go = go
        self.tolerance_ms = tolerance_ms
        self.game_clock = isinstance(go, Go) and go.time_ms is not None  # main time: the flag moves (`_move`)
        byoyomi = byoyomi_of(go)
        self.flag_ms = None if tolerance_ms is None or byoyomi is None or self.game_clock else byoyomi + tolerance_ms
        self._spec = (command, timeout_s, options, tolerance_ms)
        self.searched: list[int] = []  # what each move searched (its last scored `info`: nps x time), if it said
        self.engine = UsiClient(command, name=name, options=options, timeout_s=timeout_s)
        self._replicas: dict[int, UsiOpponent] = {}

    def replica(self, slot: int) -> UsiOpponent:
        """The player of concurrent game slot `slot` (`dlzero.play.driver.Replicable`): this one for slot 0,
        else another process of the same engine with the same options and limits, made once and kept."""
        if slot == 0:
            return self
        if slot not in self._replicas:
            command, timeout_s, options, tolerance_ms = self._spec
            self._replicas[slot] = UsiOpponent(self.name, command, self.go, timeout_s, options, tolerance_ms)
        return self._replicas[slot]

    def searched_per_move(self) -> float | None:
        """The median nodes (dlzero: playouts) a move searched over this engine's moves, its replicas' too;
        None if it never said (an engine whose `info` lines give no `nps` and `time`). The median, since a
        mean is the endings': dlzero's playouts through proven nodes cost no network call, and in games against
        Fairy-Stockfish at 1 s (2026-12-06) its mean came out at three times its median."""
        counts = self.searched + [n for r in self._replicas.values() for n in r.searched]
        return float(statistics.median(counts)) if counts else None

    def start(self) -> None:
        """Start the engine and announce a game (idempotent)."""
        if not self.engine.running:
            self.engine.start()
            self.engine.new_game()

    def close(self) -> None:
        for other in self._replicas.values():
            other.close()
        self.engine.close()

    def choose(self, games: Sequence[Game]) -> list[int | None]:
        self.start()
        return [self._move(game) for game in games]

    def _move(self, game: Game) -> int | None:
        board = game.board
        flag_ms, left = self.flag_ms, 0.0
        if self.game_clock:
            go = self.go
            left = game.clock_ms.setdefault(board.turn, float(go.time_ms))
            other = game.clock_ms.get(1 - board.turn, float(go.time_ms))
            clock = (left, other) if board.turn == cshogi.BLACK else (other, left)
            result = self.engine.go(board, go.command(clock))
            if self.tolerance_ms is not None:
                flag_ms = left + (go.byoyomi_ms or 0) + self.tolerance_ms
        else:
            result = self.engine.go(board, self.go)
        game.move_ms[len(board.history)] = result.time_ms
        if result.nps is not None and result.engine_ms is not None:
            self.searched.append(round(result.nps * result.engine_ms / 1000))
            game.move_nodes[len(board.history)] = self.searched[-1]
        elif result.nodes is not None:
            game.move_nodes[len(board.history)] = result.nodes
        if flag_ms is not None and result.time_ms > flag_ms:
            log.warning("engine '%s' answered after %.0f ms (its clock allowed %.0f ms with the tolerance) in %s: it "
                        "loses on time", self.name, result.time_ms, flag_ms, board.sfen())
            game.end = Verdict(1 - board.turn, END_TIME)
            return None
        if self.game_clock:
            game.clock_ms[board.turn] = clock_after(left, result.time_ms, self.go.inc_ms or 0)
        text = result.bestmove
        if text in ("resign", "win"):
            return None
        move = board.move_from_usi(text) if text else 0
        if not move or not board.is_legal(move):
            log.warning("engine '%s' played the illegal move %r in %s: it loses the game", self.name, text,
                        board.sfen())
            return None
        return move
