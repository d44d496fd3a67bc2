"""A small client for outside USI engines: start, options, new game, position + go -> best move and score.

The rating anchors (`dlzero.play.usi_opponent`) drive GPS Shogi, Fairy-Stockfish or any USI engine
through it, and anything else that asks an outside engine for moves or scores (a teacher labelling
positions) can use the same five calls:

    with UsiClient("/usr/games/fairy-stockfish", options={"Skill Level": 0}) as engine:
        engine.new_game()
        result = engine.go(board, Go(byoyomi_ms=100))   # result.bestmove, result.score_cp, result.mate

Why a process per engine and a reader thread: the engine's stdout is read by a daemon thread into a
queue, so every wait has a deadline (`timeout_s`) and a hung engine cannot hang the caller; the thread
stamps each line as it reads it, so a search's time (`go` written to `bestmove` read, `time_ms`) is the
engine's and the pipe's, not however long the caller took to look (scripts/clock_delay.py measures
that delay: a quarter of a millisecond, docs/usi-options.md); its stderr
is kept (last lines) so that the error for an engine that died says why. Options are checked against
the ones the engine lists in its `usi` reply, so a misspelt option is an error naming the valid ones
instead of a silently ignored `setoption`. Engines are killed when closed, when the `with` block is
left (also by Ctrl-C), and at interpreter exit for any left open.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import shlex
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

import cshogi

from dlzero.errors import DlzeroError
from dlzero.position import position_string, start_position

log = logging.getLogger("dlzero.play.usi")

QUIT_GRACE_S = 5.0  # how long a polite `quit` may take before the process is killed
_LIVE: weakref.WeakSet[UsiClient] = weakref.WeakSet()


class UsiClientError(DlzeroError):
    """An outside engine could not be started, died, refused an option, or did not answer in time."""


@dataclass(frozen=True)
class Go:
    """The limits of one search. `byoyomi_ms` alone is sent as `btime 0 wtime 0 byoyomi N` (some engines, GPS
    Shogi among them, need the clocks to accept a byoyomi); several limits may be combined. `time_ms` is a
    game clock's main time (with `inc_ms` a Fischer increment, or `byoyomi_ms` after it): `command` then sends
    both sides' remaining time, which the match keeps (`dlzero.play.usi_opponent`), the whole of it by default.
    `clocks_swapped`: the engine reads `btime` as the clock of the side that moves second, so each side's time
    goes in the other's field (Fairy-Stockfish 11.1: `dlzero.play.registry`)."""

    byoyomi_ms: int | None = None
    nodes: int | None = None
    depth: int | None = None
    time_ms: int | None = None
    inc_ms: int | None = None
    clocks_swapped: bool = False

    def command(self, clock: tuple[float, float] | None = None) -> str:
        """The text after `go`; `clock`: (Black's, White's) remaining main time in ms, for a game clock."""
        parts = []
        if self.time_ms is not None:
            black, white = clock if clock is not None else (self.time_ms, self.time_ms)
            if self.clocks_swapped:
                black, white = white, black
            parts.append(f"btime {max(0, round(black))} wtime {max(0, round(white))}")
            if self.byoyomi_ms is not None:
                parts.append(f"byoyomi {self.byoyomi_ms}")
            elif self.inc_ms:
                parts.append(f"binc {self.inc_ms} winc {self.inc_ms}")
        elif self.byoyomi_ms is not None:
            parts.append(f"btime 0 wtime 0 byoyomi {self.byoyomi_ms}")
        if self.nodes is not None:
            parts.append(f"nodes {self.nodes}")
        if self.depth is not None:
            parts.append(f"depth {self.depth}")
        return " ".join(parts)


@dataclass
class SearchResult:
    """An engine's answer to one `go`: its move and what its last scored `info` line said.

    `bestmove` is a USI move or `resign` / `win`. `score_cp` is from the side to move; `mate` is the
    signed number of plies to mate (positive: the side to move mates; an engine that prints a bare
    `mate +` / `mate -` gives +1 / -1). `time_ms`: wall time from writing `go` to reading `bestmove`,
    what a clock run by this side would charge the engine. `nps` and `engine_ms` are the last scored
    `info` line's (the engine's own speed and time), so `nps * engine_ms / 1000` is what it searched.
    """

    bestmove: str
    ponder: str | None = None
    score_cp: int | None = None
    mate: int | None = None
    depth: int | None = None
    nodes: int | None = None
    pv: list[str] = field(default_factory=list)
    time_ms: float = 0.0
    nps: int | None = None
    engine_ms: int | None = None


def position_command(board: cshogi.Board) -> str:
    """`position ...` for a board: its start position and every move since, so the engine sees the
    history (repetitions) exactly as the game went."""
    return "position " + position_string(board, start_position(board))


def _option_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _parse_info(line: str, result: SearchResult) -> None:
    """Copy the score, depth, nodes, nps, time and pv of an `info` line into `result` (only lines with a score)."""
    tokens = line.split()
    if "score" not in tokens:
        return
    cp = mate = depth = nodes = nps = engine_ms = None
    pv: list[str] = []
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if tok == "string":
            break
        if tok == "pv":
            pv = tokens[i + 1:]
            break
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        try:
            if tok == "score" and nxt in ("cp", "mate") and i + 2 < len(tokens):
                value = tokens[i + 2]
                if nxt == "cp":
                    cp = int(value)
                else:
                    mate = int(value) if value not in ("+", "-") else (1 if value == "+" else -1)
                i += 3
                continue
            if tok == "depth":
                depth = int(nxt)
            elif tok == "nodes":
                nodes = int(nxt)
            elif tok == "nps":
                nps = int(nxt)
            elif tok == "time":
                engine_ms = int(nxt)
        except ValueError:
            return  # a malformed line says nothing we can trust
        i += 1
    if cp is None and mate is None:
        return
    result.score_cp, result.mate, result.depth, result.nodes, result.pv = cp, mate, depth, nodes, pv
    result.nps, result.engine_ms = nps, engine_ms


class UsiClient:
    """One outside USI engine process, driven from our side (our own engine, which a GUI drives, is
    `dlzero.usi.UsiEngine`). `command` is an argv list or a shell-like string (split with shlex).

    `start()` runs the handshake (`usi`, the options, `isready`); `go()` starts it if needed.
    """

    def __init__(self, command: str | Sequence[str], *, name: str | None = None,
                 options: Mapping[str, object] | None = None, timeout_s: float = 120.0) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UsiClientError(f"engine '{name or '?'}': empty command")
        self.name = name or self.argv[0]
        self.timeout_s = timeout_s
        self.id_name = ""  # what the engine calls itself (`id name`)
        self.available: dict[str, str] = {}  # option name -> the rest of its `option` line
        self._options = {k: _option_value(v) for k, v in (options or {}).items()}
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[tuple[str, float] | None] = queue.Queue()
        self.last_search_ms = 0.0  # the last `search`'s time: `go` written to `bestmove` read (monotonic clock)
        self._stderr: deque[str] = deque(maxlen=20)
        self._ready = False  # handshake done and nothing sent since that needs `isready`
        self._polite = False  # the engine answered `usi`: it can be asked to quit
        self._read_at = 0.0  # when the line `_lines_until` yielded last was read (monotonic clock)

    def __enter__(self) -> UsiClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- protocol -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine, check and send the options, wait until it is ready (idempotent)."""
        if self._proc is not None:
            return
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as exc:
            self._proc = None
            raise UsiClientError(f"engine '{self.name}': cannot start {shlex.join(self.argv)!r}: {exc}") from None
        _LIVE.add(self)
        self._lines = queue.Queue()  # a fresh queue: nothing of an earlier process can be read as this one's
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, None), daemon=True).start()
        try:
            self._send("usi")
            for line in self._lines_until("usiok"):
                if line.startswith("id name "):
                    self.id_name = line[len("id name "):].strip()
                elif line.startswith("option name "):
                    name, _, rest = line[len("option name "):].partition(" type ")
                    self.available[name.strip()] = rest.strip()
            self._polite = True
            unknown = [k for k in self._options if k not in self.available]
            if unknown:
                raise self._fail(f"has no option {unknown[0]!r} (it has: {', '.join(sorted(self.available))})")
            for key, value in self._options.items():
                self._send(f"setoption name {key} value {value}")
            self._isready()
        except BaseException:
            self.close()
            raise

    def set_option(self, name: str, value: object) -> None:
        """Set an option (checked against the engine's list once it has started); applies from the next
        `new_game` or `go`."""
        if self._proc is not None and name not in self.available:
            raise self._fail(f"has no option {name!r} (it has: {', '.join(sorted(self.available))})")
        self._options[name] = _option_value(value)
        if self._proc is not None:
            self._send(f"setoption name {name} value {self._options[name]}")
            self._ready = False

    def new_game(self) -> None:
        """`usinewgame`: the positions that follow belong to a new game."""
        self.start()
        if not self._ready:
            self._isready()
        self._send("usinewgame")

    def go(self, position: cshogi.Board | str, limits: Go | str, timeout_s: float | None = None) -> SearchResult:
        """Search `position` (a board, or the text after `position `) within `limits` (a `Go`, or the
        text after `go `); the engine's best move and its last score. An engine silent for `timeout_s`
        (default: the engine's) is an error, and the engine is closed."""
        infos, reply = self.search(position, limits, timeout_s)
        result = SearchResult(bestmove=reply[1] if len(reply) > 1 else "", time_ms=self.last_search_ms)
        if len(reply) > 3 and reply[2] == "ponder":
            result.ponder = reply[3]
        for line in infos:
            _parse_info(line, result)
        return result

    def search(self, position: cshogi.Board | str, limits: Go | str,
               timeout_s: float | None = None) -> tuple[list[str], list[str]]:
        """`go`'s search, raw: every `info` line (MultiPV readers need them all) and the bestmove line's words;
        its time is left in `last_search_ms`."""
        self.start()
        if not self._ready:
            self._isready()
        command = position_command(position) if isinstance(position, cshogi.Board) else f"position {position}"
        go = limits.command() if isinstance(limits, Go) else limits
        self._send(command)
        sent = time.monotonic()
        self._send(f"go {go}".strip())
        infos: list[str] = []
        for line in self._lines_until("bestmove", timeout_s):
            if line.startswith("info "):
                infos.append(line)
            elif line.startswith("bestmove"):
                self.last_search_ms = (self._read_at - sent) * 1000.0
                return infos, line.split()
        raise AssertionError("unreachable: _lines_until ends with the bestmove line")

    def close(self) -> None:
        """`quit`, then kill the process if it is still there after a few seconds (at once if it never
        answered `usi`). Safe to call twice."""
        proc, self._proc = self._proc, None
        self._ready = False
        if proc is None:
            return
        _LIVE.discard(self)
        if self._polite and proc.poll() is None:
            try:
                proc.stdin.write("quit\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=QUIT_GRACE_S)
        self._polite = False
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()

    # -- plumbing -------------------------------------------------------------------------------
    def _isready(self) -> None:
        self._send("isready")
        for _ in self._lines_until("readyok"):
            pass
        self._ready = True

    def _pump(self, stream: IO[str], lines: queue.Queue[tuple[str, float] | None] | None) -> None:
        """Copy stdout lines into `lines` with the moment each was read (None at the end), or keep the last
        stderr lines."""
        try:
            for line in stream:
                if lines is not None:
                    lines.put((line.rstrip("\r\n"), time.monotonic()))
                else:
                    self._stderr.append(line.rstrip())
        except (OSError, ValueError):
            pass  # the stream was closed under us: the engine is gone
        if lines is not None:
            lines.put(None)

    def _fail(self, what: str) -> UsiClientError:
        tail = " | ".join(self._stderr)
        return UsiClientError(f"engine '{self.name}' ({shlex.join(self.argv)}): {what}"
                              + (f"; stderr: {tail}" if tail else ""))

    def _send(self, line: str) -> None:
        if self._proc is None:
            raise self._fail(f"is not running (while sending '{line}')")
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            time.sleep(0.05)  # let the stderr reader catch the last words
            error = self._fail(f"exited (while sending '{line}')")
            self.close()
            raise error from None

    def _lines_until(self, head: str, timeout_s: float | None = None):
        """The engine's lines up to and including the first whose first word is `head`; `_read_at` holds the
        moment the reader thread read the line last yielded."""
        limit = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        while True:
            try:
                item = self._lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                error = self._fail(f"no '{head}' within {limit:g} s")
                self._polite = False  # a hung engine would not read `quit` either: kill it at once
                self.close()
                raise error from None
            if item is None:
                try:
                    status = f" with status {self._proc.wait(timeout=1.0)}"
                except subprocess.TimeoutExpired:
                    status = ""
                time.sleep(0.05)  # let the stderr reader catch the last words
                error = self._fail(f"exited{status} while we waited for '{head}'")
                self.close()
                raise error
            line, self._read_at = item
            yield line
            if line.split(" ", 1)[0] == head:
                return


@atexit.register
def _kill_leftovers() -> None:
    """No engine outlives the interpreter, whatever path it took to exit."""
    for engine in list(_LIVE):
        engine.close()
