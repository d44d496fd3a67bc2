"""An outside USI engine as a side of a match (`dlzero rate --engine NAME=COMMAND`).

The engine is started once (`COMMAND` is split like a shell command line, so a bare path or
`dlzero usi --model m.onnx --set usi.playouts=64` both work), told `usi`, `isready`, `usinewgame`,
and then asked for each move with `position ...` (the game's start position and every move so far,
so it sees the history for repetitions) and `go <go>` (e.g. `byoyomi 1000` or `nodes 800`; whatever the
engine understands). A reply `bestmove resign`, `bestmove win` or an illegal move loses the game; an
engine that exits or stays silent past `timeout_s` is an error naming the engine and the tail of its stderr.

Lines are read by a thread into a queue, so every wait has a deadline and a hung engine cannot hang a
rating run.
"""

from __future__ import annotations

import logging
import queue
import shlex
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence

import cshogi

from dlzero.errors import DlzeroError

log = logging.getLogger("dlzero.gating.usi")


class UsiEngineError(DlzeroError):
    """An outside engine could not be started, died, or did not answer in time."""


class UsiOpponent:
    """A `MoveChooser` backed by a USI engine process (started on first use)."""

    def __init__(self, name: str, command: str, go: str = "byoyomi 1000", timeout_s: float = 120.0) -> None:
        argv = shlex.split(command)
        if not argv:
            raise UsiEngineError(f"engine '{name}': empty command")
        self.name = name
        self.command = command
        self.go = go
        self.timeout_s = timeout_s
        self._argv = argv
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=20)
        self._ready = False  # the handshake completed: the engine can be asked to quit politely

    # -- process --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine and complete the USI handshake (idempotent)."""
        if self._proc is not None:
            return
        try:
            self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as exc:
            raise UsiEngineError(f"engine '{self.name}': cannot start {self.command!r}: {exc}") from None
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, None), daemon=True).start()
        self._send("usi")
        self._wait_for("usiok")
        self._send("isready")
        self._wait_for("readyok")
        self._send("usinewgame")
        self._ready = True

    def _pump(self, stream, lines: queue.Queue | None) -> None:
        for line in stream:
            if lines is None:
                self._stderr.append(line.rstrip())
            else:
                lines.put(line.rstrip("\r\n"))
        if lines is not None:
            lines.put(None)

    def _fail(self, what: str) -> UsiEngineError:
        tail = " | ".join(self._stderr)
        return UsiEngineError(f"engine '{self.name}' ({self.command}): {what}" + (f"; stderr: {tail}" if tail else ""))

    def _send(self, line: str) -> None:
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._fail(f"exited (while sending '{line}')") from None

    def _wait_for(self, head: str) -> str:
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0.0))
            except queue.Empty:
                raise self._fail(f"no '{head}' within {self.timeout_s:g} s") from None
            if line is None:
                time.sleep(0.05)  # let the stderr reader catch the last words
                raise self._fail(f"exited while we waited for '{head}'")
            if line.split(" ", 1)[0] == head:
                return line

    def close(self) -> None:
        """Ask the engine to quit; kill it if it does not within a few seconds (or never got ready)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not self._ready:
            proc.kill()
            proc.wait()
            return
        self._ready = False
        try:
            proc.stdin.write("quit\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- moves ----------------------------------------------------------------------------------
    def choose(self, boards: Sequence[cshogi.Board]) -> list[int | None]:
        self.start()
        return [self._move(board) for board in boards]

    def _move(self, board: cshogi.Board) -> int | None:
        start = board.copy()
        for _ in range(len(board.history)):
            start.pop()
        head = "startpos" if start.sfen() == cshogi.STARTING_SFEN else f"sfen {start.sfen()}"
        moves = " ".join(cshogi.move_to_usi(m) for m in board.history)
        self._send(f"position {head}" + (f" moves {moves}" if moves else ""))
        self._send(f"go {self.go}".strip())
        reply = self._wait_for("bestmove").split()
        text = reply[1] if len(reply) > 1 else ""
        if text in ("resign", "win"):
            return None
        move = board.move_from_usi(text) if text else 0
        if not move or not board.is_legal(move):
            log.warning("engine '%s' played the illegal move %r in %s: it loses the game", self.name, text,
                        board.sfen())
            return None
        return move
