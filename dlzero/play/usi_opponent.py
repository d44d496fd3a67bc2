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
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import cshogi

from dlzero.play.game import Game
from dlzero.play.usi_client import Go, UsiClient, UsiClientError

__all__ = ["UsiClientError", "UsiOpponent"]

log = logging.getLogger("dlzero.play.usi")


class UsiOpponent:
    """A `MoveChooser` backed by a USI engine process. `command` is split like a shell command line (a
    bare path or `dlzero usi --model m.onnx --set usi.playouts=64` both work); `go` is a `Go` or the
    text after `go` (e.g. `byoyomi 1000`, `nodes 800`: whatever the engine understands)."""

    def __init__(self, name: str, command: str | Sequence[str], go: Go | str = "byoyomi 1000",
                 timeout_s: float = 120.0, options: Mapping[str, object] | None = None) -> None:
        self.name = name
        self.go = go
        self._spec = (command, timeout_s, options)
        self.engine = UsiClient(command, name=name, options=options, timeout_s=timeout_s)
        self._replicas: dict[int, UsiOpponent] = {}

    def replica(self, slot: int) -> UsiOpponent:
        """The player of concurrent game slot `slot` (`dlzero.play.driver.Replicable`): this one for slot 0,
        else another process of the same engine with the same options and limits, made once and kept."""
        if slot == 0:
            return self
        if slot not in self._replicas:
            command, timeout_s, options = self._spec
            self._replicas[slot] = UsiOpponent(self.name, command, self.go, timeout_s, options)
        return self._replicas[slot]

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
        return [self._move(game.board) for game in games]

    def _move(self, board: cshogi.Board) -> int | None:
        text = self.engine.go(board, self.go).bestmove
        if text in ("resign", "win"):
            return None
        move = board.move_from_usi(text) if text else 0
        if not move or not board.is_legal(move):
            log.warning("engine '%s' played the illegal move %r in %s: it loses the game", self.name, text,
                        board.sfen())
            return None
        return move
